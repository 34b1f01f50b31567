//! Running scripts: the copy, the environment, the user, the output, and
//! the end of every process a script started.

use std::path::{Path, PathBuf};

use super::*;

fn skill_with(scripts: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let folder = crate::test_support::write_skill(&dir.path().canonicalize().unwrap(), "tool", "Tool.", "Run scripts.");
    std::fs::create_dir_all(folder.join("scripts")).unwrap();
    for (name, text) in scripts {
        std::fs::write(folder.join("scripts").join(name), text).unwrap();
    }
    (dir, folder)
}

fn request<'a>(folder: &'a Path, script: &'a str, args: &'a [String]) -> ScriptRequest<'a> {
    ScriptRequest {
        folder,
        script,
        args,
        stdin: None,
        timeout: Duration::from_secs(20),
        script_user: None,
        containment: ScriptContainment::Auto,
        files: &[],
    }
}

#[tokio::test]
async fn a_script_runs_in_a_copy_with_a_scrubbed_environment() {
    let (_dir, folder) = skill_with(&[(
        "env.sh",
        "echo \"args=$*\"; echo \"home=$HOME\"; echo \"lang=$LANG\"; env | cut -d= -f1 | sort | tr '\\n' ' ';\
         echo; cat SKILL.md | head -1; echo changed > SKILL.md; echo oops >&2; exit 3",
    )]);
    let args = vec!["a".to_owned(), "b c".to_owned()];
    let receipt = run_skill_script(request(&folder, "env.sh", &args)).await.unwrap();
    assert_eq!(receipt.exit_code, Some(3), "{receipt:?}");
    assert!(receipt.output.contains("args=a b c"), "{}", receipt.output);
    assert!(receipt.output.contains("home=/"), "{}", receipt.output);
    assert!(
        !receipt
            .output
            .contains(&format!("home={}", std::env::var("HOME").unwrap_or_default()))
    );
    assert!(receipt.output.contains("lang=C"));
    let names_line = receipt.output.lines().find(|l| l.contains("PATH")).unwrap();
    let mut names: Vec<&str> = names_line.split_whitespace().collect();
    names.retain(|n| !["PWD", "SHLVL", "_", "OLDPWD"].contains(n));
    assert_eq!(names, vec!["HERALD_OUT_DIR", "HOME", "LANG", "PATH"], "{names_line}");
    assert!(receipt.output.contains("---"));
    assert!(receipt.output.contains("oops"), "stderr is captured");
    assert!(
        std::fs::read_to_string(folder.join("SKILL.md"))
            .unwrap()
            .starts_with("---")
    );
    assert_eq!(receipt.status().split(" in ").next(), Some("exit 3"));
}

#[tokio::test]
async fn stdin_reaches_the_script() {
    let (_dir, folder) = skill_with(&[("upper.sh", "tr a-z A-Z")]);
    let mut req = request(&folder, "scripts/upper.sh", &[]);
    req.stdin = Some("hello");
    let receipt = run_skill_script(req).await.unwrap();
    assert!(receipt.succeeded());
    assert_eq!(receipt.output, "HELLO");
}

#[tokio::test]
async fn only_files_in_scripts_may_run() {
    let (_dir, folder) = skill_with(&[("ok.sh", "true"), ("data.txt", "x")]);
    std::fs::write(folder.join("outside.sh"), "true").unwrap();
    for (script, fragment) in [
        ("../outside.sh", "`..`"),
        ("/bin/sh", "relative"),
        ("missing.sh", "no file `scripts/missing.sh`"),
        ("data.txt", "not executable"),
    ] {
        let err = run_skill_script(request(&folder, script, &[]))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(fragment), "{script}: {err}");
    }
}

#[tokio::test]
async fn output_is_capped_at_one_mebibyte() {
    let (_dir, folder) = skill_with(&[("loud.sh", "head -c 3000000 /dev/zero | tr '\\0' x")]);
    let receipt = run_skill_script(request(&folder, "loud.sh", &[])).await.unwrap();
    assert!(receipt.truncated);
    assert!(receipt.output.len() < MAX_OUTPUT_BYTES + 100);
    assert!(receipt.output.ends_with("[output truncated at 1 MiB]"));
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let (_dir, folder) = skill_with(&[("hang.sh", "sleep 300 &\necho \"child $!\"\nsleep 300\n")]);
    let mut req = request(&folder, "hang.sh", &[]);
    req.timeout = Duration::from_millis(500);
    let receipt = run_skill_script(req).await.unwrap();
    assert!(receipt.timed_out, "{receipt:?}");
    assert_eq!(receipt.signal, Some(nix::sys::signal::Signal::SIGKILL as i32));
    let child: u32 = receipt
        .output
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid in {:?}", receipt.output));
    // The background `sleep` was in the group: it must be gone (or a
    // zombie waiting for init), not sleeping on.
    let mut alive = true;
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
        if stat.is_empty() || state == Some("Z") || state == Some("X") {
            alive = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive, "background child {child} survived the timeout");
}

/// Whether process `pid` is gone: no longer there, or a zombie no one reaped.
fn is_dead(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
    stat.is_empty() || matches!(state, Some("Z" | "X"))
}

/// A script leaves a child that escaped its session with `setsid` (and one
/// that double-forked away) and ends: its output arrives whole, not as a
/// false "truncated at 1 MiB", the children are dead when the run returns,
/// and the run does not wait for them.
#[tokio::test]
async fn children_that_escape_the_script_are_killed_and_do_not_hold_its_output() {
    let (_dir, folder) = skill_with(&[(
        "escape.sh",
        "setsid sh -c 'echo $$ > setsid.pid; exec sleep 600' &\n\
         (sh -c 'echo $$ > double.pid; exec sleep 600' &) \n\
         until [ -s setsid.pid ] && [ -s double.pid ]; do sleep 0.01; done\n\
         echo \"escaped $(cat setsid.pid) $(cat double.pid)\"\n\
         head -c 5000 /dev/zero | tr '\\0' y; echo; echo done\n",
    )]);
    let started = std::time::Instant::now();
    let receipt = run_skill_script(request(&folder, "escape.sh", &[])).await.unwrap();
    assert!(receipt.succeeded(), "{receipt:?}");
    assert!(!receipt.truncated, "{}", receipt.output);
    assert!(
        receipt.output.ends_with(&format!("{}\ndone\n", "y".repeat(5000))),
        "{}",
        receipt.output
    );
    let pids: Vec<u32> = receipt
        .output
        .lines()
        .find_map(|l| l.strip_prefix("escaped "))
        .unwrap()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect();
    for pid in pids {
        assert!(is_dead(pid), "escaped child {pid} survived the script");
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the run waited for the children"
    );
}

/// Herald runs these tests as root: scripts then run as `nobody`, in a copy
/// that user can read and write, unless `root` is named.
#[tokio::test]
async fn scripts_run_as_the_script_user_when_herald_is_root() {
    let (_dir, folder) = skill_with(&[("who.sh", "id -u; echo x > written.txt && echo wrote")]);
    let receipt = run_skill_script(request(&folder, "who.sh", &[])).await.unwrap();
    let is_root = nix::unistd::geteuid().is_root();
    let expected = if is_root {
        nix::unistd::User::from_name("nobody").unwrap().unwrap().uid.to_string()
    } else {
        nix::unistd::geteuid().to_string()
    };
    assert_eq!(receipt.output.lines().next(), Some(expected.as_str()), "{receipt:?}");
    assert!(receipt.output.contains("wrote"), "{receipt:?}");
    if is_root {
        let mut as_root = request(&folder, "who.sh", &[]);
        as_root.script_user = Some("root");
        let receipt = run_skill_script(as_root).await.unwrap();
        assert_eq!(receipt.output.lines().next(), Some("0"), "{receipt:?}");
    }
}

#[tokio::test]
async fn a_script_user_that_does_not_exist_is_a_clear_error() {
    let (_dir, folder) = skill_with(&[("who.sh", "id -u")]);
    let mut req = request(&folder, "who.sh", &[]);
    req.script_user = Some("no-such-user-here");
    let err = run_skill_script(req).await.unwrap_err().to_string();
    assert!(
        err.contains("skills.script_user") && err.contains("no-such-user-here"),
        "{err}"
    );
}

#[tokio::test]
async fn the_messages_files_are_in_herald_files_dir_and_a_climbing_name_stays_inside() {
    let (_dir, folder) = skill_with(&[(
        "files.sh",
        "cd \"$HERALD_FILES_DIR\" && for f in *; do echo \"[$f] $(cat \"$f\")\"; done; \
         ls -a \"$HERALD_FILES_DIR/..\" | tr '\\n' ' '",
    )]);
    let files = [
        ScriptFile {
            name: "notes.txt".into(),
            bytes: b"first".to_vec(),
        },
        ScriptFile {
            name: "../../etc/x".into(),
            bytes: b"climber".to_vec(),
        },
        ScriptFile {
            name: "notes.txt".into(),
            bytes: b"second".to_vec(),
        },
    ];
    let receipt = run_skill_script(ScriptRequest {
        files: &files,
        ..request(&folder, "files.sh", &[])
    })
    .await
    .unwrap();
    assert!(receipt.succeeded(), "{receipt:?}");
    for line in ["[notes.txt] first", "[notes-2.txt] second", "[_.._etc_x] climber"] {
        assert!(receipt.output.contains(line), "{line}: {}", receipt.output);
    }
    let beside: Vec<&str> = receipt.output.lines().last().unwrap().split_whitespace().collect();
    assert!(
        !beside.iter().any(|name| name.contains("etc") || *name == "x"),
        "nothing was written beside files/: {beside:?}"
    );
    assert_eq!(receipt.inputs, ["notes.txt", "_.._etc_x", "notes-2.txt"]);
    assert!(
        receipt
            .for_model()
            .contains("files in $HERALD_FILES_DIR: notes.txt, _.._etc_x, notes-2.txt")
    );
}

#[tokio::test]
async fn without_files_there_is_no_herald_files_dir() {
    let (_dir, folder) = skill_with(&[("env.sh", "echo \"dir=[${HERALD_FILES_DIR-unset}]\"")]);
    let receipt = run_skill_script(request(&folder, "env.sh", &[])).await.unwrap();
    assert!(receipt.output.contains("dir=[unset]"), "{}", receipt.output);
    assert!(receipt.inputs.is_empty());
}
