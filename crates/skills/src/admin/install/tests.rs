use std::io::Write;

use zip::write::SimpleFileOptions;

use super::*;

const SKILL: &str = "---\nname: weather\ndescription: Weather reports.\n---\nAsk wttr.in.\n";

fn limits() -> InstallLimits {
    InstallLimits {
        max_files: 5,
        max_file_bytes: 1000,
        max_total_bytes: 2500,
        max_entries: 8,
    }
}

enum Entry<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Link(&'a str, &'a str),
}

fn zip_of(dir: &Path, entries: &[Entry<'_>]) -> PathBuf {
    let path = dir.join("skill.zip");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for entry in entries {
        match entry {
            Entry::File(name, bytes) => {
                writer.start_file(*name, options).unwrap();
                writer.write_all(bytes).unwrap();
            }
            Entry::Dir(name) => writer.add_directory(*name, options).unwrap(),
            Entry::Link(name, target) => writer.add_symlink(*name, *target, options).unwrap(),
        }
    }
    writer.finish().unwrap();
    path
}

#[test]
fn a_folder_installs_under_its_name_with_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("download");
    std::fs::create_dir_all(source.join("scripts")).unwrap();
    std::fs::write(source.join(SKILL_FILE), SKILL).unwrap();
    std::fs::write(source.join("scripts/get.sh"), "curl wttr.in").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(source.join("scripts/get.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(source.join(".git")).unwrap();
    std::fs::write(source.join(".git/config"), "x").unwrap();
    let target_dir = dir.path().join("skills");
    let installed = install_skill(&source, &target_dir, &limits()).unwrap();
    assert_eq!(installed.name.as_str(), "weather");
    assert_eq!(installed.folder, target_dir.join("weather"));
    assert_eq!(installed.files, 2);
    assert!(installed.warnings.is_empty(), "{:?}", installed.warnings);
    let mode = std::fs::metadata(target_dir.join("weather/scripts/get.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!target_dir.join("weather/.git").exists());
    let again = install_skill(&source, &target_dir, &limits()).unwrap_err().to_string();
    assert!(again.contains("exists already"), "{again}");
}

#[test]
fn a_zip_installs_with_or_without_a_top_folder() {
    for entries in [
        vec![
            Entry::File("SKILL.md", SKILL.as_bytes()),
            Entry::File("references/api.md", b"api"),
        ],
        vec![
            Entry::Dir("weather/"),
            Entry::File("weather/SKILL.md", SKILL.as_bytes()),
            Entry::File("weather/references/api.md", b"api"),
            Entry::File("__MACOSX/weather/._SKILL.md", b"junk"),
        ],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let archive = zip_of(dir.path(), &entries);
        let installed = install_skill(&archive, &dir.path().join("skills"), &limits()).unwrap();
        assert_eq!(installed.files, 2);
        assert_eq!(
            std::fs::read_to_string(installed.folder.join("references/api.md")).unwrap(),
            "api"
        );
    }
}

#[test]
fn unsafe_or_oversized_archives_are_refused_and_leave_nothing() {
    let big = vec![b'x'; 1001];
    let medium = vec![b'x'; 900];
    let cases: Vec<(Vec<Entry<'_>>, &str)> = vec![
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("../evil.sh", b"x"),
            ],
            "climbs out",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("a/../../evil", b"x"),
            ],
            "climbs out",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("/etc/evil", b"x"),
            ],
            "absolute",
        ),
        (
            vec![Entry::File("SKILL.md", SKILL.as_bytes()), Entry::File("C:/evil", b"x")],
            "absolute",
        ),
        (
            vec![Entry::File("SKILL.md", SKILL.as_bytes()), Entry::File("a\\b", b"x")],
            "`\\`",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::Link("passwd", "/etc/passwd"),
            ],
            "link",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("./SKILL.md", b"again"),
            ],
            "twice",
        ),
        (
            vec![Entry::File("SKILL.md", SKILL.as_bytes()), Entry::File("big.bin", &big)],
            "more than 1000 bytes",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("a", &medium),
                Entry::File("b", &medium),
                Entry::File("c", &medium),
            ],
            "bytes in all",
        ),
        (
            vec![
                Entry::File("SKILL.md", SKILL.as_bytes()),
                Entry::File("1", b"1"),
                Entry::File("2", b"2"),
                Entry::File("3", b"3"),
                Entry::File("4", b"4"),
                Entry::File("5", b"5"),
            ],
            "more than 5 files",
        ),
        (
            (0..9)
                .map(|i| Entry::Dir(["d0/", "d1/", "d2/", "d3/", "d4/", "d5/", "d6/", "d7/", "d8/"][i]))
                .collect(),
            "9 entries",
        ),
        (vec![Entry::File("README.md", b"no skill")], "no SKILL.md"),
        (
            vec![Entry::File("SKILL.md", b"---\nname: weather\n---\n")],
            "no description",
        ),
        (
            vec![
                Entry::File("a/SKILL.md", SKILL.as_bytes()),
                Entry::File("b/SKILL.md", SKILL.as_bytes()),
            ],
            "not one folder",
        ),
    ];
    for (entries, fragment) in cases {
        let dir = tempfile::tempdir().unwrap();
        let archive = zip_of(dir.path(), &entries);
        let target = dir.path().join("skills");
        let err = install_skill(&archive, &target, &limits()).unwrap_err().to_string();
        assert!(err.contains(fragment), "want `{fragment}`: {err}");
        let left: Vec<_> = std::fs::read_dir(&target).map(|d| d.collect()).unwrap_or_default();
        assert!(left.is_empty(), "{fragment}: left {left:?}");
    }
}

#[test]
fn a_folder_with_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("weather");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join(SKILL_FILE), SKILL).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", source.join("passwd")).unwrap();
    let err = install_skill(&source, &dir.path().join("skills"), &limits())
        .unwrap_err()
        .to_string();
    assert!(err.contains("link"), "{err}");
}
