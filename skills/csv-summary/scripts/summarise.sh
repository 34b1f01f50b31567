#!/bin/sh
# Summarises a CSV read from standard input: rows, columns, and for each
# numeric column its minimum, maximum and mean.
# Usage: summarise.sh [DELIMITER]    (the default delimiter is a comma)
# Quoted fields containing the delimiter are not supported; see
# references/csv-dialects.md.
set -eu
delimiter="${1:-,}"
awk -F"$delimiter" '
NR == 1 {
  for (i = 1; i <= NF; i++) { header = $i; gsub(/^[ \t"]+|[ \t"\r]+$/, "", header); name[i] = header }
  columns = NF
  next
}
{
  rows++
  for (i = 1; i <= columns; i++) {
    value = $i
    gsub(/^[ \t"]+|[ \t"\r]+$/, "", value)
    if (value == "") { empty[i]++; continue }
    if (value ~ /^-?[0-9]+([.][0-9]+)?$/) {
      numeric[i]++
      sum[i] += value
      if (!(i in low) || value + 0 < low[i]) low[i] = value + 0
      if (!(i in high) || value + 0 > high[i]) high[i] = value + 0
    } else {
      words[i]++
    }
  }
}
END {
  printf "rows: %d\ncolumns: %d\n", rows, columns
  for (i = 1; i <= columns; i++) {
    if (numeric[i] > 0 && words[i] == 0) {
      printf "- %s: numeric, min %g, max %g, mean %.2f", name[i], low[i], high[i], sum[i] / numeric[i]
    } else {
      printf "- %s: text", name[i]
    }
    if (empty[i] > 0) printf ", %d empty", empty[i]
    printf "\n"
  }
}'
