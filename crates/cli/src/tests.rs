use clap::CommandFactory;

use super::*;

#[test]
fn cli_definition_is_valid() {
    Cli::command().debug_assert();
}

#[test]
fn partitions_take_names_after_the_group() {
    let cli = Cli::try_parse_from([
        "leasehold",
        "partitions",
        "add",
        "--redis-url",
        "redis://h/",
        "--group",
        "g",
        "p1",
        "p2",
    ])
    .unwrap();
    let Command::Partitions(PartitionsCommand::Add {
        group,
        grant_delay_ms,
        partitions,
    }) = cli.command
    else {
        panic!("not an add: {cli:?}");
    };
    assert_eq!(group.group, "g");
    assert_eq!(grant_delay_ms, None);
    assert_eq!(partitions, ["p1", "p2"]);
    // At least one name.
    let none = Cli::try_parse_from([
        "leasehold",
        "partitions",
        "remove",
        "--redis-url",
        "redis://h/",
        "--group",
        "g",
    ]);
    assert!(none.is_err());
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    let mut all = vec!["leasehold"];
    all.extend(args);
    Cli::try_parse_from(all)
}

#[test]
fn negative_looking_names_and_weights_and_names_after_a_double_dash() {
    let cli = parse(&[
        "partitions",
        "weight",
        "-u",
        "redis://h/",
        "-g",
        "g",
        "-3",
        "-5",
    ])
    .unwrap();
    let Command::Partitions(PartitionsCommand::Weight {
        partition, weight, ..
    }) = cli.command
    else {
        panic!("not a weight: {cli:?}");
    };
    assert_eq!((partition.as_str(), weight), ("-3", -5));
    let cli = parse(&[
        "partitions",
        "add",
        "-g",
        "g",
        "-7",
        "p1",
        "-u",
        "redis://h/",
        "--",
        "-dash",
        "--x",
    ])
    .unwrap();
    let Command::Partitions(PartitionsCommand::Add { partitions, .. }) = cli.command else {
        panic!("not an add: {cli:?}");
    };
    assert_eq!(partitions, ["-7", "p1", "-dash", "--x"]);
    // Without `--`, a name that looks like a flag is one.
    assert!(parse(&["partitions", "add", "-u", "redis://h/", "-g", "g", "-dash"]).is_err());
}

#[test]
fn short_flags_durations_and_output_formats() {
    let cli = parse(&[
        "drain",
        "-u",
        "redis://h/",
        "-p",
        "ops",
        "-g",
        "g",
        "-r",
        "r",
        "-f",
        "-t",
        "350ms",
    ])
    .unwrap();
    let target = cli.command.redis().target();
    assert_eq!(
        (target.prefix.as_str(), target.timeout),
        ("ops", Duration::from_millis(350))
    );
    let Command::Drain { replica, force } = cli.command else {
        panic!("not a drain: {cli:?}");
    };
    assert!(force);
    assert_eq!(
        (replica.group.group.as_str(), replica.replica.as_str()),
        ("g", "r")
    );

    let timeout = |args: &[&str]| {
        let mut all = vec!["list", "-u", "redis://h/"];
        all.extend(args);
        parse(&all).map(|c| c.command.redis().target().timeout)
    };
    assert_eq!(timeout(&[]).unwrap(), Duration::from_secs(2));
    assert_eq!(
        timeout(&["--timeout", "1m"]).unwrap(),
        Duration::from_secs(60)
    );
    assert_eq!(
        timeout(&["--timeout-ms", "1500"]).unwrap(),
        Duration::from_millis(1500)
    );
    assert!(timeout(&["--timeout", "0s"]).is_err());
    assert!(timeout(&["--timeout", "2000"]).is_err(), "a unit is needed");
    assert!(timeout(&["--timeout", "1s", "--timeout-ms", "5"]).is_err());

    let json = |args: &[&str]| {
        let mut all = vec!["leader", "-u", "redis://h/", "-d", "d"];
        all.extend(args);
        match parse(&all).map(|c| c.command) {
            Ok(Command::Leader { duty, output, .. }) => {
                assert_eq!(duty, "d");
                Ok(output.json())
            }
            Ok(other) => panic!("not a leader: {other:?}"),
            Err(e) => Err(e),
        }
    };
    assert!(!json(&[]).unwrap());
    assert!(json(&["-o", "json"]).unwrap());
    assert!(json(&["--output=json"]).unwrap());
    assert!(json(&["--json"]).unwrap());
    assert!(!json(&["-o", "table"]).unwrap());
    assert!(json(&["-o", "yaml"]).is_err());
    assert!(json(&["-o", "table", "--json"]).is_err());

    let cli = parse(&["watch", "-u", "redis://h/", "-g", "g", "-i", "2s"]).unwrap();
    let Command::Watch { interval, .. } = cli.command else {
        panic!("not a watch: {cli:?}");
    };
    assert_eq!(interval, Duration::from_secs(2));
    assert!(matches!(
        parse(&["status", "-u", "redis://h/", "-g", "g", "-s"])
            .unwrap()
            .command,
        Command::Status { summary: true, .. }
    ));
}

#[test]
fn the_exit_codes_are_in_the_top_level_help_only() {
    let top = Cli::command().render_help().to_string();
    assert!(top.contains("Exit codes:\n  0  success"), "{top}");
    let mut cli = Cli::command();
    let status = cli.find_subcommand_mut("status").unwrap();
    let help = status.render_long_help().to_string();
    assert!(!help.contains("0  success"), "{help}");
    assert!(help.contains("Exit codes: `leasehold --help`"), "{help}");
}

#[test]
fn a_parsed_command_prints_no_url_or_token() {
    let cli = Cli::try_parse_from([
        "leasehold",
        "dashboard",
        "-u",
        "redis://user:url-secret@h:26379/",
        "--sentinel",
        "m",
        "--primary-url",
        "rediss://user:url-secret@p/0",
        "--admin-token",
        "token-secret-0123456789",
        "--read-token",
        "token-secret-9876543210",
    ])
    .unwrap();
    let printed = format!("{cli:?}");
    assert!(!printed.contains("secret"), "{printed}");
    assert!(printed.contains("<redacted>"), "{printed}");
}
