//! The examples' command line: up to `N` optional positional numbers, each with a default and a
//! check. `--help` (or `-h`) prints the usage on stdout and exits 0; a missing value takes its
//! default; anything that does not parse or pass the check prints the usage on stderr and exits
//! with status 2. Shared by the examples through `#[path = "common/args.rs"] mod args;`.

/// The arguments of program `name`, or the process exits (see the module docs). `ok(i, n)`
/// says whether `n` is acceptable as argument `i`.
pub fn numbers<const N: usize>(
    name: &str,
    usage: &str,
    defaults: [u64; N],
    ok: impl Fn(usize, u64) -> bool,
) -> [u64; N] {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{usage}");
        std::process::exit(0);
    }
    let bad = |a: &str| -> ! {
        eprintln!("{name}: bad argument `{a}`\n{usage}");
        std::process::exit(2)
    };
    if let Some(extra) = argv.get(N) {
        bad(extra);
    }
    let mut out = defaults;
    for (i, a) in argv.iter().enumerate() {
        out[i] = a
            .parse::<u64>()
            .ok()
            .filter(|&n| ok(i, n))
            .unwrap_or_else(|| bad(a));
    }
    out
}
