//! What a script run did, as the model reads it and as the store keeps it.

use serde::{Deserialize, Serialize};

use crate::budget::{MODEL_OUTPUT_BYTES, STORED_ARGUMENT_BYTES, STORED_OUTPUT_BYTES, cut_end, cut_middle};

/// What happened, as stored and as shown to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptReceipt {
    pub script: String,
    pub args: Vec<String>,
    /// The exit code, when the script exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Standard output and error, interleaved as written, at most 1 MiB.
    pub output: String,
    pub truncated: bool,
    /// The names the message's files had in `$HERALD_FILES_DIR`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// The files it left in `out/`; stored in the file store by the caller,
    /// which keeps the references in the receipt.
    #[serde(skip)]
    pub files: super::ScriptFiles,
}

impl ScriptReceipt {
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// What the store keeps of a run: the output and each argument cut to
    /// their caps, the cuts marked, so a receipt costs kilobytes whatever
    /// the script printed.
    pub(crate) fn stored(&self) -> serde_json::Value {
        let (output, left_out) = cut_middle(&self.output, STORED_OUTPUT_BYTES);
        let args: Vec<String> = self
            .args
            .iter()
            .map(|arg| cut_end(arg, STORED_ARGUMENT_BYTES))
            .collect();
        serde_json::json!({
            "script": self.script,
            "args": args,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "duration_ms": self.duration_ms,
            "output": output,
            "output_bytes": self.output.len(),
            "output_truncated": self.truncated || left_out > 0,
            "inputs": self.inputs,
        })
    }

    /// What the model reads: the status line, the files the script was
    /// given, and the output, within [`MODEL_OUTPUT_BYTES`].
    pub(crate) fn for_model(&self) -> String {
        let files = if self.inputs.is_empty() {
            String::new()
        } else {
            format!("\nfiles in $HERALD_FILES_DIR: {}", self.inputs.join(", "))
        };
        cut_middle(
            &format!("{}{files}\n{}", self.status(), self.output),
            MODEL_OUTPUT_BYTES,
        )
        .0
    }

    /// One line: `exit 0 in 120 ms` / `killed after timeout (30000 ms)`.
    pub fn status(&self) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, _, _) => format!("killed after the timeout ({} ms)", self.duration_ms),
            (false, Some(code), _) => format!("exit {code} in {} ms", self.duration_ms),
            (false, None, Some(signal)) => format!("ended by signal {signal} after {} ms", self.duration_ms),
            (false, None, None) => format!("ended after {} ms", self.duration_ms),
        }
    }
}
