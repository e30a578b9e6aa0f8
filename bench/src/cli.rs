//! The one command-line parser of every bench binary, on [`lexopt`].
//!
//! Every binary takes the same names for the same things:
//!
//! * `--quick`: a smoke test — few, short rounds; its figures are not a
//!   measurement (each binary's help says how few and how short);
//! * `--rounds N`: the number of timed rounds, i.e. samples per cell
//!   (overrides `--quick`'s);
//! * `--seed N`: the seed of the shuffled orders;
//! * `--out PATH`: where output files go;
//! * `-h`, `--help`: the help text, on stdout, and exit status 0.
//!
//! A bad argument is rejected with the error and the usage line on stderr
//! and exit status 2.

use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;

pub use lexopt::{Parser, ValueExt};

/// One command-line argument, owned (so the parser can be used to take the
/// flag's value): a flag, spelt as given (`--rounds`, `-h`), or a
/// positional value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// `--name` or `-c` (a `--name=value` flag's value is read with
    /// [`value`] or [`positive`] as for `--name value`).
    Flag(String),
    /// A positional argument.
    Value(OsString),
}

impl Token {
    fn of(arg: lexopt::Arg<'_>) -> Token {
        match arg {
            lexopt::Arg::Short(c) => Token::Flag(format!("-{c}")),
            lexopt::Arg::Long(l) => Token::Flag(format!("--{l}")),
            lexopt::Arg::Value(v) => Token::Value(v),
        }
    }

    /// The error "this argument is not expected here".
    pub fn unexpected(&self) -> lexopt::Error {
        match self {
            Token::Flag(f) => lexopt::Error::UnexpectedOption(f.clone()),
            Token::Value(v) => lexopt::Error::UnexpectedArgument(v.clone()),
        }
    }
}

/// A binary's usage: a one-line synopsis and the help text under it.
#[derive(Clone, Debug)]
pub struct Usage {
    /// The binary's name.
    pub name: &'static str,
    /// The synopsis lines, without `usage: ` (one per way to call it).
    pub synopsis: &'static str,
    /// The flags, one per line, already aligned.
    pub flags: String,
}

impl Usage {
    /// The usage line(s): `usage: NAME SYNOPSIS`.
    pub fn line(&self) -> String {
        let pad = " ".repeat("usage: ".len() + self.name.len() + 1);
        let mut out = String::new();
        for (i, l) in self.synopsis.lines().enumerate() {
            if i == 0 {
                out.push_str(&format!("usage: {} {l}\n", self.name));
            } else {
                out.push_str(&format!("{pad}{l}\n"));
            }
        }
        out
    }

    /// The full help text: the usage line(s), a blank line, the flags.
    pub fn help(&self) -> String {
        format!("{}\n{}", self.line(), self.flags)
    }
}

/// What parsing a command line came to, short of success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `--help` was given: print this on stdout, exit 0.
    Help(String),
    /// A bad argument: print this on stderr, exit 2.
    Error(String),
}

impl Stop {
    /// Prints the message where it belongs and exits (0 for help, 2 for an
    /// error).
    pub fn exit(self) -> ! {
        match self {
            Stop::Help(text) => {
                print!("{text}");
                std::process::exit(0)
            }
            Stop::Error(text) => {
                eprint!("{text}");
                std::process::exit(2)
            }
        }
    }
}

/// Parses `args` (without the program name): `each` is called with every
/// argument but `-h`/`--help`, and returns whether it knew it; an unknown
/// argument or an error of `each` stops with the usage line.
pub fn parse<I, F>(usage: &Usage, args: I, mut each: F) -> Result<(), Stop>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
    F: FnMut(&Token, &mut Parser) -> Result<bool, lexopt::Error>,
{
    let mut p = Parser::from_args(args);
    let fail =
        |e: lexopt::Error| Stop::Error(format!("{}: error: {e}\n{}", usage.name, usage.line()));
    while let Some(arg) = p.next().map_err(fail)? {
        let arg = Token::of(arg);
        if matches!(&arg, Token::Flag(f) if f == "-h" || f == "--help") {
            return Err(Stop::Help(usage.help()));
        }
        if !each(&arg, &mut p).map_err(fail)? {
            return Err(fail(arg.unexpected()));
        }
    }
    Ok(())
}

/// [`parse`] over the process's arguments; exits on `--help` or an error.
pub fn parse_env<F>(usage: &Usage, each: F)
where
    F: FnMut(&Token, &mut Parser) -> Result<bool, lexopt::Error>,
{
    if let Err(stop) = parse(usage, std::env::args_os().skip(1), each) {
        stop.exit();
    }
}

/// The value of the current flag, parsed as a `T`.
pub fn value<T>(p: &mut Parser) -> Result<T, lexopt::Error>
where
    T: FromStr,
    T::Err: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    p.value()?.parse()
}

/// The value of the current flag, which must be a positive integer.
pub fn positive(p: &mut Parser) -> Result<u64, lexopt::Error> {
    p.value()?.parse_with(|s| match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("not a positive integer: {s}")),
    })
}

/// The flags every bench binary shares; see the [module documentation](self).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Common {
    /// `--quick`.
    pub quick: bool,
    /// `--rounds N`, if given.
    pub rounds: Option<u64>,
    /// `--seed N`, if given.
    pub seed: Option<u64>,
    /// `--out PATH`, if given.
    pub out: Option<PathBuf>,
}

impl Common {
    /// Takes `arg` if it is one of the shared flags; returns whether it was.
    pub fn take(&mut self, arg: &Token, p: &mut Parser) -> Result<bool, lexopt::Error> {
        let Token::Flag(flag) = arg else {
            return Ok(false);
        };
        match flag.as_str() {
            "--quick" => self.quick = true,
            "--rounds" => self.rounds = Some(positive(p)?),
            "--seed" => self.seed = Some(value(p)?),
            "--out" => self.out = Some(p.value()?.into()),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The help lines of the shared flags, for a [`Usage`]'s `flags`:
    /// `quick` says what `--quick` does in this binary, `out` what `--out`
    /// names and its default.
    pub fn help(quick: &str, rounds_default: u64, out: &str) -> String {
        format!(
            "  --quick        {quick} (a smoke test, not a measurement)\n\
             \x20 --rounds N     timed rounds, i.e. samples per cell (default {rounds_default})\n\
             \x20 --seed N       seed of the shuffled orders\n\
             \x20 --out PATH     {out}\n"
        )
    }
}

/// What the help text of bench binary `name` lacks, for the binaries' tests: its start (`usage:
/// NAME`), any of `texts` (the durations, what `--quick` is), lines of at most 100 characters;
/// `None` when it lacks nothing.
pub fn help_problem(help: &str, name: &str, texts: &[&str]) -> Option<String> {
    if !help.starts_with(&format!("usage: {name}")) {
        return Some(format!("does not start with `usage: {name}`:\n{help}"));
    }
    if let Some(text) = texts.iter().find(|t| !help.contains(*t)) {
        return Some(format!("{text} missing from:\n{help}"));
    }
    help.lines()
        .find(|l| l.chars().count() > 100)
        .map(|l| format!("line over 100 characters: {l}"))
}

/// The command line that reproduces a run of bench binary `bin` with arguments `args`
/// (`--features peers` when this binary was built with them).
pub fn command_line(bin: &str, args: &[String]) -> String {
    let mut s = "cargo run --release -p specalloc-bench".to_string();
    if cfg!(feature = "peers") {
        s.push_str(" --features peers");
    }
    s.push_str(" --bin ");
    s.push_str(bin);
    if !args.is_empty() {
        s.push_str(" -- ");
        s.push_str(&args.join(" "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> Usage {
        Usage {
            name: "demo",
            synopsis: "[--quick] [--rounds N] [--x N]\n--other",
            flags: Common::help("two rounds", 30, "output directory") + "  --x N  a number\n",
        }
    }

    fn run(args: &[&str]) -> Result<(Common, Option<u64>), Stop> {
        let mut c = Common::default();
        let mut x = None;
        parse(&usage(), args.iter().copied(), |arg, p| {
            if c.take(arg, p)? {
                return Ok(true);
            }
            match arg {
                Token::Flag(f) if f == "--x" => x = Some(positive(p)?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok((c, x))
    }

    #[test]
    fn shared_and_own_flags() {
        let (c, x) = run(&[
            "--quick", "--rounds", "3", "--x=4", "--out", "o", "--seed", "9",
        ])
        .unwrap();
        assert_eq!(
            c,
            Common {
                quick: true,
                rounds: Some(3),
                seed: Some(9),
                out: Some("o".into())
            }
        );
        assert_eq!(x, Some(4));
        assert_eq!(run(&[]).unwrap(), (Common::default(), None));
    }

    #[test]
    fn help_goes_to_stdout_with_the_flags() {
        let Err(Stop::Help(h)) = run(&["--rounds", "2", "--help"]) else {
            panic!("no help");
        };
        assert!(h.starts_with("usage: demo [--quick]"), "{h}");
        assert!(h.contains("\n            --other\n"), "{h}");
        assert!(h.contains("--rounds N     timed rounds"), "{h}");
        assert!(matches!(run(&["-h"]), Err(Stop::Help(_))));
    }

    #[test]
    fn help_problems_are_named() {
        let h = usage().help();
        assert_eq!(help_problem(&h, "demo", &["two rounds", "--x N"]), None);
        let p = |h: &str, texts: &[&str]| help_problem(h, "demo", texts).unwrap();
        assert!(p(&h, &["three rounds"]).starts_with("three rounds missing"));
        assert!(p("usage: other", &[]).starts_with("does not start with `usage: demo`"));
        let long = format!("usage: demo\n{}\n", "x".repeat(101));
        assert!(p(&long, &[]).starts_with("line over 100 characters"));
    }

    #[test]
    fn bad_arguments_stop_with_the_usage_line() {
        for bad in [
            &["--bogus"][..],
            &["--rounds", "0"],
            &["--rounds"],
            &["--x", "y"],
            &["extra"],
        ] {
            let Err(Stop::Error(e)) = run(bad) else {
                panic!("{bad:?} accepted");
            };
            assert!(e.starts_with("demo: error: "), "{e}");
            assert!(e.contains("\nusage: demo "), "{e}");
            assert!(
                !e.contains("--other\n\n"),
                "the full help is not repeated: {e}"
            );
        }
    }
}
