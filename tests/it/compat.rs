//! Contract evolution through the real binary: `check --against` on a real git repository made
//! in a temp dir, `diff` of two directories, and `lock` written then compared against.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn sub(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn spec_text() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("specs/research_topic.toml")).unwrap()
}

#[test]
fn check_against_a_git_revision_fails_a_breaking_change_and_passes_its_twin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("specs")).unwrap();
    std::fs::write(d.join("specs/research_topic.toml"), spec_text()).unwrap();
    git(d, &["init", "-q"]);
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "one"]);

    // The compatible change (a longer question allowed), committed: passes against HEAD~1.
    let wider = spec_text().replace("maxLength = 500", "maxLength = 800");
    std::fs::write(d.join("specs/research_topic.toml"), &wider).unwrap();
    git(d, &["commit", "-qam", "wider input"]);
    let o = sub(d, &["check", "specs/", "--against", "HEAD~1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // The breaking twin: a shorter question breaks callers.
    let narrower = spec_text().replace("maxLength = 500", "maxLength = 300");
    std::fs::write(d.join("specs/research_topic.toml"), &narrower).unwrap();
    git(d, &["commit", "-qam", "narrower input"]);
    let o = sub(
        d,
        &[
            "check",
            "specs/",
            "--against",
            "HEAD~1",
            "--format",
            "github",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "::error file=specs/research_topic.toml,line=28,col=58,title=input-bound-tightened::"
        ),
        "{out}"
    );
    assert!(out.contains("callers break"), "{out}");

    // Accepted with --allow: a notice, exit 0.
    let o = sub(
        d,
        &[
            "check",
            "specs/",
            "--against",
            "HEAD~1",
            "--allow",
            "input-bound-tightened",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // A renamed file is followed: only the rename of the *spec* (its name) breaks callers.
    git(
        d,
        &["mv", "specs/research_topic.toml", "specs/research.toml"],
    );
    std::fs::write(
        d.join("specs/research.toml"),
        narrower.replace("\"research_topic\"", "\"research\""),
    )
    .unwrap();
    git(d, &["commit", "-qam", "rename"]);
    let o = sub(
        d,
        &["check", "specs/", "--against", "HEAD~1", "--format", "json"],
    );
    let diags: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let codes: Vec<&str> = diags
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["spec-renamed"], "{}", text(&o));

    // A spec that did not exist at the revision is new: a note only.
    std::fs::write(
        d.join("specs/other.toml"),
        spec_text().replace("\"research_topic\"", "\"other\""),
    )
    .unwrap();
    let o = sub(d, &["check", "specs/", "--against", "HEAD"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("note[spec-added]: new spec `other`"),
        "{}",
        text(&o)
    );

    // Clear errors: unknown revision; not a repository.
    let o = sub(d, &["check", "specs/", "--against", "no-such-rev"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("unknown revision `no-such-rev`"),
        "{}",
        text(&o)
    );
    let bare = tempfile::tempdir().unwrap();
    std::fs::create_dir(bare.path().join("specs")).unwrap();
    let o = sub(bare.path(), &["check", "specs/", "--against", "main"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not a git repository"), "{}", text(&o));
    // A revision spelled like an option is refused, never passed to git as one.
    let o = sub(d, &["check", "specs/", "--against=--output=x"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!d.join("x").exists());
    // git not installed.
    let o = Command::new(BIN)
        .args(["check", "specs/", "--against", "HEAD"])
        .current_dir(d)
        .env("PATH", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("`git` was not found"), "{}", text(&o));
}

#[test]
fn diff_two_directories_and_check_against_a_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for side in ["old", "new"] {
        std::fs::create_dir(d.join(side)).unwrap();
        std::fs::write(d.join(side).join("r.toml"), spec_text()).unwrap();
    }
    let o = sub(d, &["diff", "old", "new"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // The output gains a property the old closed object did not allow: parents break.
    let widened = spec_text().replace(
        "properties.gaps = ",
        "properties.extra = { type = \"string\", maxLength = 5 }\nproperties.gaps = ",
    );
    assert_ne!(widened, spec_text());
    std::fs::write(d.join("new/r.toml"), &widened).unwrap();
    let o = sub(d, &["diff", "old", "new"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("error[output-property-added]"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("parents parsing them break"),
        "{}",
        text(&o)
    );

    // Lock the old specs, then compare the new ones against the lock file.
    let o = sub(d, &["lock", "old"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(d.join("contracts.lock.json"), &o.stdout).unwrap();
    let again = sub(d, &["lock", "old"]);
    assert_eq!(
        again.stdout, o.stdout,
        "the same specs lock to the same bytes"
    );
    let o = sub(d, &["check", "new", "--against", "contracts.lock.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("output-property-added"), "{}", text(&o));
    let o = sub(d, &["check", "old", "--against", "contracts.lock.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // An [[acknowledged]] entry with a reason accepts it.
    std::fs::write(
        d.join("ack.toml"),
        "[[acknowledged]]\nspec = \"research_topic\"\ncode = \"output-property-added\"\nreason = \"every parent ignores unknown keys\"\n\n[[acknowledged]]\nspec = \"research_topic\"\ncode = \"output-size-grew\"\nreason = \"still under 4,000\"\n",
    )
    .unwrap();
    let o = sub(d, &["diff", "old", "new", "--acknowledged", "ack.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("acknowledged: every parent ignores unknown keys"),
        "{}",
        text(&o)
    );
}
