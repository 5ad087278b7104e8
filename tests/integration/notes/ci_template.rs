//! The GitHub Actions template (templates/ci), run end to end against the bare remote: it
//! vouches, signed, for a pull request's head, runs the base branch's check where no key is,
//! and never prints its push token.

use std::path::Path;

use serde_json::Value;

use super::{World, laptop_stop, shown_of_tests, subject_of, sync};
use crate::support::*;

/// Runs `templates/ci/github-actions.yml` as GitHub would for one event, on this machine: each
/// job on a machine of its own (its own HOME, runner temp and state home), `actions/checkout`
/// as a clone of the bare remote at the ref the template names, the step that installs vigil
/// as the binaries under test, every `run:` step as bash -e with the env GitHub gives it.
/// Secrets reach only a job that names the environment that holds them.
struct Actions<'a> {
    world: &'a World,
    workflow: yaml_rust2::Yaml,
    /// What `${{ … }}` expressions evaluate to.
    context: std::collections::HashMap<&'static str, String>,
    /// Variables set over the workflow's `env:` (the check command, for a project that is not
    /// a cargo project).
    overrides: Vec<(&'static str, String)>,
    /// Where GitHub is: `None` for a `VIGIL_REMOTE` of this machine's remote, or a server URL
    /// for the template's own push URL, with the run's token in it.
    server: Option<String>,
    /// What every step printed, in order.
    log: std::cell::RefCell<String>,
}

impl<'a> Actions<'a> {
    fn new(world: &'a World, head: &str, base: &str) -> Actions<'a> {
        let text = std::fs::read_to_string(repo_path("templates/ci/github-actions.yml")).unwrap();
        let workflow = yaml_rust2::YamlLoader::load_from_str(&text)
            .unwrap()
            .remove(0);
        let mut context = std::collections::HashMap::new();
        context.insert(
            "github.event.pull_request.head.sha || github.sha",
            head.to_string(),
        );
        context.insert("github.token", "token-of-the-run".to_string());
        context.insert(
            "secrets.VIGIL_SIGN_KEY",
            std::fs::read_to_string(world.secret())
                .unwrap()
                .trim()
                .to_string(),
        );
        let _ = base;
        Actions {
            world,
            workflow,
            context,
            overrides: Vec::new(),
            server: None,
            log: Default::default(),
        }
    }

    fn expand(&self, text: &str, secrets: bool) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${{") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find("}}").expect("an expression ends") + at;
            let expression = rest[at + 3..end].trim();
            let value = if expression.starts_with("secrets.") && !secrets {
                String::new()
            } else {
                self.context
                    .get(expression)
                    .unwrap_or_else(|| panic!("the emulator knows no `{expression}`"))
                    .clone()
            };
            out.push_str(&value);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }

    fn env_of(&self, yaml: &yaml_rust2::Yaml, secrets: bool) -> Vec<(String, String)> {
        yaml["env"]
            .as_hash()
            .map(|hash| {
                hash.iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().unwrap().to_string(),
                            self.expand(v.as_str().unwrap(), secrets),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs a job; whether every step passed.
    fn job(&self, name: &str, base: &str) -> bool {
        let job = &self.workflow["jobs"][name];
        let secrets = job["environment"].as_str() == Some("vigil-signing");
        let machine = tempfile::tempdir().unwrap();
        let home = machine.path().join("home");
        let temp = machine.path().join("runner-temp");
        let workspace = machine.path().join("work/app");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&temp).unwrap();
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), home.display().to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("RUNNER_TEMP".into(), temp.display().to_string()),
            ("RUNNER_NAME".into(), format!("emulated-{name}")),
            ("GITHUB_ACTIONS".into(), "true".into()),
            (
                "GITHUB_SERVER_URL".into(),
                self.server
                    .clone()
                    .unwrap_or_else(|| "https://github.com".into()),
            ),
            ("GITHUB_REPOSITORY".into(), "acme/app".into()),
            ("GITHUB_RUN_ID".into(), "4242".into()),
            (
                "GITHUB_WORKFLOW_REF".into(),
                "acme/app/.github/workflows/vigil.yml@refs/heads/main".into(),
            ),
            ("GITHUB_WORKFLOW_SHA".into(), base.to_string()),
            (
                "VIGIL_STATE_HOME".into(),
                machine.path().join("state").display().to_string(),
            ),
        ];
        if self.server.is_none() {
            // GitHub's push URL is not this machine's: the template's knob for another one.
            env.push((
                "VIGIL_REMOTE".into(),
                self.world.remote.display().to_string(),
            ));
        }
        env.extend(self.env_of(&self.workflow, secrets));
        env.extend(self.env_of(job, secrets));
        for (key, value) in &self.overrides {
            env.push((key.to_string(), value.clone()));
        }
        for step in job["steps"].as_vec().unwrap() {
            if let Some(action) = step["uses"].as_str() {
                assert!(action.starts_with("actions/checkout@"), "{action}");
                let reference = self.expand(step["with"]["ref"].as_str().unwrap(), secrets);
                git(
                    machine.path(),
                    &[
                        "clone",
                        "-q",
                        self.world.remote.to_str().unwrap(),
                        workspace.to_str().unwrap(),
                    ],
                );
                git(&workspace, &["checkout", "-q", "--detach", &reference]);
                continue;
            }
            if step["id"].as_str() == Some("install-vigil") {
                let to = temp.join("vigil");
                std::fs::create_dir_all(&to).unwrap();
                for binary in ["marker-writer", "stop-gate"] {
                    std::os::unix::fs::symlink(bin_dir().join(binary), to.join(binary)).unwrap();
                }
                continue;
            }
            let script = step["run"].as_str().expect("a step runs a script");
            let script = self.expand(script, secrets);
            let mut cmd = std::process::Command::new("bash");
            cmd.arg("-e")
                .arg("-c")
                .arg(&script)
                .env_clear()
                .current_dir(&workspace);
            for (key, value) in env.iter().chain(&self.env_of(step, secrets)) {
                cmd.env(key, value);
            }
            let out = cmd.output().unwrap();
            let mut log = self.log.borrow_mut();
            log.push_str(&String::from_utf8_lossy(&out.stdout));
            log.push_str(&String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                return false;
            }
        }
        true
    }

    /// Runs the workflow: each job in order, one that `needs` a failed job skipped.
    fn run(&self, base: &str) -> Vec<(String, bool)> {
        let mut results: Vec<(String, bool)> = Vec::new();
        for (name, job) in self.workflow["jobs"].as_hash().unwrap() {
            let name = name.as_str().unwrap().to_string();
            let needs_ok = job["needs"]
                .as_str()
                .is_none_or(|need| results.iter().any(|(n, ok)| n == need && *ok));
            let passed = needs_ok && self.job(&name, base);
            results.push((name, passed));
        }
        results
    }
}

/// The agent's clone `work` commits `lib.rs` as `contents` and pushes its `feature` branch: the
/// commit.
fn push_lib(work: &Path, contents: &str, message: &str) -> String {
    std::fs::write(work.join("lib.rs"), contents).unwrap();
    git(work, &["commit", "-qam", message]);
    git(work, &["push", "-q", "origin", "feature"]);
    git(work, &["rev-parse", "HEAD"])
}

/// The template's jobs for a pull request's `head` on `base`, whose check greps `lib.rs` for
/// `answer`: each job's name and whether it passed.
fn greps_for_answer(world: &World, head: &str, base: &str) -> Vec<(String, bool)> {
    let mut actions = Actions::new(world, head, base);
    actions
        .overrides
        .push(("VIGIL_CHECK_COMMAND", "grep -q answer lib.rs".into()));
    actions.run(base)
}

#[test]
fn the_ci_template_vouches_signed_for_a_pull_requests_head_and_a_laptop_with_it_stops() {
    let world = World::new();
    let base = git(&world.remote, &["rev-parse", "main"]);
    // The agent's pull request: a branch with a change.
    let work = world.clone("agent");
    git(&work, &["checkout", "-q", "-b", "feature"]);
    let head = push_lib(&work, "pub fn answer() -> u32 { 6 * 7 }\n", "compute it");
    assert_eq!(
        greps_for_answer(&world, &head, &base),
        vec![("test".to_string(), true), ("vouch".to_string(), true)]
    );
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);

    // The laptop, on the pull request's head: after a sync its Stop accepts CI's signature.
    let laptop = world.clone("laptop");
    git(&laptop, &["checkout", "-q", "feature"]);
    world.syncs_and_passes(&laptop);
    let text = shown_of_tests(&laptop, &[]);
    assert_contains!(text, "https://github.com/acme/app/actions/runs/4242");
    assert_contains!(text, "signed by");
    let subject = subject_of(&laptop);
    let object = subject.strip_prefix("git-tree:").unwrap();
    let note = git(
        &world.remote,
        &["notes", "--ref", "vigil/tests", "show", object],
    );
    let payload: Value =
        serde_json::from_str(note.lines().find(|l| !l.is_empty()).unwrap()).unwrap();
    assert_eq!(
        payload["origin"]["workflow_sha"],
        base.as_str(),
        "the workflow file's commit"
    );
    assert_eq!(payload["origin"]["runner"], "emulated-vouch");

    // A check that fails: `vouch` never runs, nothing is published for that content, and the
    // laptop on it is denied.
    let broken = push_lib(&work, "pub fn broken() {}\n", "break it");
    assert_eq!(
        greps_for_answer(&world, &broken, &base),
        vec![("test".to_string(), false), ("vouch".to_string(), false)]
    );
    git(&laptop, &["pull", "-q", "--ff-only", "origin", "feature"]);
    sync(&laptop);
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("subject mismatch"), "{reason}");
}

/// The template's own push URL carries the run's token: when the push fails, what the job
/// prints names the remote without it (GitHub masks its own token, not one in `VIGIL_REMOTE`).
#[test]
fn the_ci_templates_push_url_never_prints_its_token() {
    let world = World::new();
    let head = git(&world.remote, &["rev-parse", "main"]);
    let mut actions = Actions::new(&world, &head, &head);
    actions
        .overrides
        .push(("VIGIL_CHECK_COMMAND", "grep -q answer lib.rs".into()));
    // A server nothing listens on: the push fails at once.
    actions.server = Some("https://127.0.0.1:1".into());
    assert_eq!(
        actions.run(&head),
        vec![("test".to_string(), true), ("vouch".to_string(), false)]
    );
    let log = actions.log.borrow();
    assert_contains!(
        *log,
        "sync with https://x-access-token:***@127.0.0.1:1/acme/app.git"
    );
    assert!(!log.contains("token-of-the-run"), "{log}");
}

#[test]
fn the_ci_template_runs_the_base_branchs_check_where_no_key_is_and_signs_where_nothing_runs() {
    let text = std::fs::read_to_string(repo_path("templates/ci/github-actions.yml")).unwrap();
    let workflow = yaml_rust2::YamlLoader::load_from_str(&text)
        .unwrap()
        .remove(0);
    // Yaml reads `on` as the key "on".
    let on = &workflow["on"];
    assert!(
        !on["pull_request_target"].is_badvalue(),
        "the base branch's workflow runs for a pull request"
    );
    assert!(
        on["pull_request"].is_badvalue(),
        "never the pull request's own workflow"
    );
    assert_eq!(workflow["permissions"].as_hash().map(|h| h.len()), Some(0));
    for (name, job) in workflow["jobs"].as_hash().unwrap() {
        let name = name.as_str().unwrap();
        let steps = job["steps"].as_vec().unwrap();
        let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
        let uses_secret = steps.iter().any(|s| format!("{s:?}").contains("secrets."));
        let runs_the_check = runs.iter().any(|r| {
            r.contains("sh -c \"$VIGIL_CHECK_COMMAND\"") || r.contains("marker-writer\" run")
        });
        for step in steps.iter().filter(|s| s["uses"].as_str().is_some()) {
            assert_eq!(
                step["with"]["persist-credentials"].as_bool(),
                Some(false),
                "{name}: no credentials left in a checkout"
            );
        }
        if uses_secret {
            assert_eq!(job["environment"].as_str(), Some("vigil-signing"), "{name}");
            assert!(
                !runs_the_check,
                "{name}: where the key is, nothing of the content runs"
            );
        } else {
            assert!(job["environment"].is_badvalue(), "{name}");
            assert_eq!(
                job["permissions"]["contents"].as_str(),
                Some("read"),
                "{name}"
            );
        }
        if runs_the_check {
            assert!(!uses_secret, "{name}");
        }
    }
}
