//! Usage errors in the CLI's own style: one line, `leasehold: error: ...`, exit code 2
//! (clap's own errors span several lines); `--help` and `--version` as clap prints
//! them. And the parser of durations (`--timeout 2s`).

use std::process::ExitCode;
use std::time::Duration;

use clap::CommandFactory as _;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::Cli;
use crate::error::EXIT_USAGE;

/// A duration as people write it: `2s`, `500ms`, `1m 30s` (humantime); above zero.
///
/// # Errors
/// What is wrong with it, for clap's message.
pub fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (for example 2s, 500ms)"))?;
    if d.is_zero() {
        return Err("must be above zero".to_owned());
    }
    Ok(d)
}

/// A secret from the command line or the environment (a token): its `Debug` prints no
/// value, so a parsed command can be printed whole.
#[derive(Clone)]
pub struct SecretArg(pub String);

impl std::fmt::Debug for SecretArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Parses a secret (any text).
///
/// # Errors
/// Never; a `Result` for clap's `value_parser`.
pub fn secret(text: &str) -> Result<SecretArg, String> {
    Ok(SecretArg(text.to_owned()))
}

/// Ends a run whose arguments clap refused: help and version as clap prints them (exit
/// 0), anything else in one line on stderr, exit code 2.
pub fn fail(e: &clap::Error) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => e.exit(),
        _ => {
            eprintln!("leasehold: error: {}", one_line(e, &args));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Clap's error `e` for the arguments `args` (without the program name), as one line.
fn one_line(e: &clap::Error, args: &[String]) -> String {
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return missing_command(args);
    }
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let mut command = None;
    for line in lines {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            command = Some(command_of_usage(usage));
            break;
        }
        if line.starts_with("For more information") {
            break;
        }
        if line.starts_with("tip:") {
            message.push_str("; ");
        } else if line.starts_with('[') || message.ends_with(':') {
            message.push(' ');
        } else {
            message.push_str(", ");
        }
        message.push_str(line);
    }
    if let Some(word) = flag_like_word(e, args) {
        // Clap names the first letter of `-dash` alone ('-d'): name the word.
        let short = word.chars().take(2).collect::<String>();
        message = message.replace(&format!("'{short}'"), &format!("'{word}'"));
        message = message.replace(&format!("'-- {short}'"), &format!("'-- {word}'"));
    }
    let command = command.unwrap_or_else(|| "leasehold".to_owned());
    format!("{message} (`{command} --help` for usage)")
}

/// For an unexpected short flag, the argument it came from if that is a longer word
/// (`-dash`, a partition name that needs `--` before it).
fn flag_like_word<'a>(e: &clap::Error, args: &'a [String]) -> Option<&'a str> {
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(flag)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    if flag.len() != 2 || !flag.starts_with('-') || flag.starts_with("--") {
        return None;
    }
    args.iter()
        .map(String::as_str)
        .find(|a| a.starts_with(flag.as_str()) && a.len() > 2 && !a.starts_with("--"))
}

/// `leasehold partitions weight` of `leasehold partitions weight [OPTIONS] ...`.
fn command_of_usage(usage: &str) -> String {
    usage
        .split_whitespace()
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The message of a command run without its subcommand (`leasehold`, `leasehold
/// partitions`): which ones there are.
fn missing_command(args: &[String]) -> String {
    let mut command = Cli::command();
    let mut path = vec!["leasehold".to_owned()];
    for arg in args {
        let Some(sub) = command.find_subcommand(arg).cloned() else {
            break;
        };
        path.push(arg.clone());
        command = sub;
    }
    let names: Vec<&str> = command
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|n| *n != "help")
        .collect();
    let path = path.join(" ");
    format!(
        "`{path}` needs a command: {} (`{path} --help` for usage)",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn message(args: &[&str]) -> String {
        let mut all = vec!["leasehold"];
        all.extend(args);
        let e = Cli::try_parse_from(&all).unwrap_err();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        one_line(&e, &args)
    }

    #[test]
    fn clap_errors_become_one_line() {
        let m = message(&["partitions", "add", "-u", "redis://h/", "-g", "g", "-dash"]);
        assert_eq!(
            m,
            "unexpected argument '-dash' found; tip: to pass '-dash' as a value, use '-- \
             -dash' (`leasehold partitions add --help` for usage)"
        );
        let m = message(&["status", "--group", "g"]);
        assert_eq!(
            m,
            "the following required arguments were not provided: --redis-url <URL> \
             (`leasehold status --help` for usage)"
        );
        let m = message(&["leader", "-u", "redis://h/", "-d", "d", "-o", "yaml"]);
        assert!(
            m.starts_with(
                "invalid value 'yaml' for '--output <FORMAT>' [possible values: table, json]"
            ),
            "{m}"
        );
        let m = message(&["statsu"]);
        assert!(
            m.starts_with(
                "unrecognized subcommand 'statsu'; tip: a similar subcommand exists: 'status'"
            ),
            "{m}"
        );
        let m = message(&["list", "-u", "redis://h/", "--timeout", "2000"]);
        assert!(m.contains("time unit needed"), "{m}");
        for m in [m, message(&["status", "--grop", "g"])] {
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn a_missing_command_lists_the_commands() {
        assert_eq!(
            message(&[]),
            "`leasehold` needs a command: status, leader, watch, owner, moves, list, partitions, \
             drain, undrain, plan, dashboard (`leasehold --help` for usage)"
        );
        assert_eq!(
            message(&["partitions"]),
            "`leasehold partitions` needs a command: add, remove, weight, prefer, list \
             (`leasehold partitions --help` for usage)"
        );
    }
}
