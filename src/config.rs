//! One TOML configuration file for every option, under the environment and the flags.
//!
//! Every option has an environment variable (`DOCPIPE_*`, and `AWS_REGION`). A config file
//! (`--config FILE` or `DOCPIPE_CONFIG`) sets the same options by the variable's name in lower
//! case without the `DOCPIPE_` prefix; tables only group keys, their names are ignored:
//!
//! ```toml
//! database_url = "postgres://docpipe@db:5432/docpipe?sslmode=require"
//! [worker]
//! max_batch_tokens = 16384
//! ```
//! Precedence: flag > environment > file > built-in default. The file is applied by setting
//! each variable that is not already set, before the flags are parsed, so clap does the rest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::CommandFactory;

/// Where an option's effective value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Env,
    File,
    Default,
}

/// Every option with an environment variable: variable → (default, help), over all subcommands.
pub fn options<C: CommandFactory>() -> BTreeMap<String, (Option<String>, String)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![C::command()];
    while let Some(cmd) = stack.pop() {
        for arg in cmd.get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            if env == "DOCPIPE_CONFIG" {
                continue;
            }
            let default = arg.get_default_values().first().map(|d| d.to_string_lossy().into_owned());
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let entry = out.entry(env.to_string_lossy().into_owned()).or_insert((default.clone(), help.clone()));
            if entry.1.is_empty() {
                entry.1 = help;
            }
        }
        stack.extend(cmd.get_subcommands().cloned());
    }
    out
}

/// The key for an environment variable in the file: `DOCPIPE_MAX_BATCH_TOKENS` → `max_batch_tokens`.
pub fn key(env: &str) -> String {
    env.strip_prefix("DOCPIPE_").unwrap_or(env).to_lowercase()
}

/// The config file named by `--config` in `args` or by `DOCPIPE_CONFIG`.
pub fn path_from(args: &[String]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("DOCPIPE_CONFIG").map(PathBuf::from)
}

/// Read the file's options as `variable → value`; unknown keys are an error that lists the
/// known ones.
pub fn read(path: &Path, known: &BTreeMap<String, (Option<String>, String)>) -> Result<BTreeMap<String, String>> {
    let raw = std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
    let table: toml::Table = raw.parse().with_context(|| format!("parsing config file {}", path.display()))?;
    let by_key: BTreeMap<String, &String> = known.keys().map(|env| (key(env), env)).collect();
    let mut out = BTreeMap::new();
    let mut flat = Vec::new();
    for (k, v) in table {
        match v {
            toml::Value::Table(t) => flat.extend(t),
            v => flat.push((k, v)),
        }
    }
    for (k, v) in flat {
        let Some(env) = by_key.get(&k) else {
            let names: Vec<&String> = by_key.keys().collect();
            bail!(
                "{}: unknown option {k:?}; known: {}",
                path.display(),
                names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            );
        };
        let value = match v {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => bail!("{}: option {k:?} must be a string, number or boolean, not {other}", path.display()),
        };
        out.insert((*env).clone(), value);
    }
    Ok(out)
}

/// Apply the config file (if any) to the environment, under variables already set. Returns the
/// variables it set. Runs before any thread is started.
pub fn apply<C: CommandFactory>(args: &[String]) -> Result<BTreeMap<String, String>> {
    let Some(path) = path_from(args) else { return Ok(BTreeMap::new()) };
    let values = read(&path, &options::<C>())?;
    let mut set = BTreeMap::new();
    for (env, value) in values {
        if std::env::var_os(&env).is_none() {
            // called at the top of main, before the runtime or any other thread exists
            std::env::set_var(&env, &value);
            set.insert(env, value);
        }
    }
    Ok(set)
}

/// Hide secrets: passwords in URLs, and whole values of secret-looking variables.
pub fn redact(env: &str, value: &str) -> String {
    let upper = env.to_uppercase();
    if upper.contains("SECRET") || upper.contains("PASSWORD") || upper.ends_with("_TOKEN") {
        return "***".into();
    }
    docpipe_ops::redact::url(value)
}

/// The effective configuration, one line per option: `key = value  # source`.
pub fn print<C: CommandFactory>(from_file: &BTreeMap<String, String>, file: Option<&Path>) {
    match file {
        Some(p) => println!("# config file: {}", p.display()),
        None => println!("# no config file (--config FILE or DOCPIPE_CONFIG)"),
    }
    println!("# precedence: flag > environment > file > default; secrets redacted");
    for (env, (default, help)) in options::<C>() {
        let (value, source) = match std::env::var(&env) {
            Ok(v) if from_file.contains_key(&env) => (Some(v), Source::File),
            Ok(v) => (Some(v), Source::Env),
            Err(_) => (default, Source::Default),
        };
        let shown = match &value {
            Some(v) => format!("{:?}", redact(&env, v)),
            None => "(unset)".into(),
        };
        let source = match source {
            Source::Env => format!("env {env}"),
            Source::File => "file".into(),
            Source::Default => "default".into(),
        };
        let help = help.lines().next().unwrap_or("").trim_end_matches('.');
        println!(
            "{} = {shown}  # {source}{}",
            key(&env),
            if help.is_empty() { String::new() } else { format!(" — {help}") }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Demo {
        #[arg(long, env = "DOCPIPE_DEMO_URL", default_value = "amqp://guest:guest@h/")]
        demo_url: String,
        #[command(subcommand)]
        cmd: Sub,
    }
    #[derive(clap::Subcommand)]
    enum Sub {
        Run {
            #[arg(long, env = "DOCPIPE_DEMO_TOKENS", default_value_t = 8)]
            tokens: usize,
        },
    }

    #[test]
    fn file_keys_map_to_variables_and_unknown_keys_fail() {
        let known = options::<Demo>();
        assert_eq!(known.keys().collect::<Vec<_>>(), vec!["DOCPIPE_DEMO_TOKENS", "DOCPIPE_DEMO_URL"]);
        let dir = std::env::temp_dir().join(format!("docpipe-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(&good, "demo_url = \"amqp://u:pw@rabbit/\"\n[worker]\ndemo_tokens = 16\n").unwrap();
        let got = read(&good, &known).unwrap();
        assert_eq!(got["DOCPIPE_DEMO_TOKENS"], "16");
        assert_eq!(got["DOCPIPE_DEMO_URL"], "amqp://u:pw@rabbit/");
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "demo_tokenz = 1\n").unwrap();
        let err = read(&bad, &known).unwrap_err().to_string();
        assert!(err.contains("unknown option \"demo_tokenz\"") && err.contains("demo_tokens"), "{err}");
        assert_eq!(path_from(&["docpipe".into(), "--config".into(), "x.toml".into()]), Some(PathBuf::from("x.toml")));
        assert_eq!(redact("DOCPIPE_DEMO_URL", "amqp://u:pw@rabbit/"), "amqp://u:***@rabbit/");
        assert_eq!(redact("AWS_SECRET_ACCESS_KEY", "abc"), "***");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
