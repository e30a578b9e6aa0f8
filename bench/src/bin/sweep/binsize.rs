//! `--binsize`: the binary-size cost of specialisation
//! (`examples/nm_probe.rs` with and without the opt-out switch).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use specalloc_bench::sweep::{self, SPECIALISED};
use specalloc_bench::table::align;
use specalloc_bench::workers::{cargo_build, output, target_dir};

use crate::{command_line, Opts};

pub(crate) fn binsize(opts: &Opts) -> Result<(), String> {
    let dir = opts.out.join("binsize");
    let mut rows = Vec::new();
    for (label, features) in [
        ("specialised", &[][..]),
        ("opt-out", &["no-size-specialized"][..]),
    ] {
        // The driver's own target directory: cargo keeps the two feature
        // sets apart, and each binary is measured before the next build.
        let target = target_dir();
        eprintln!("[sweep] building examples/nm_probe.rs ({label})");
        cargo_build("specalloc", &["--example", "nm_probe"], features, &target)?;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let bin = target.join("release").join("examples").join("nm_probe");
        let stripped = dir.join(format!("nm_probe-{label}.stripped"));
        output(Command::new("strip").arg("-o").arg(&stripped).arg(&bin))?;
        let size = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.len())
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        let nm = output(
            Command::new("nm")
                .args(["-S", "-C", "--defined-only"])
                .arg(&bin),
        )?;
        let (routines, bytes) = sweep::routine_bytes(&nm);
        rows.push((label, size(&bin)?, size(&stripped)?, routines, bytes));
    }
    let mut report = String::new();
    let _ = writeln!(
        report,
        "binary-size cost of specialisation: examples/nm_probe.rs (ten size classes through \
         spec::boxed), built with and without the no-size-specialized switch"
    );
    let _ = writeln!(report, "command: {}", command_line(opts));
    let mut lines = vec![vec![
        "build".to_string(),
        "as built (B)".into(),
        "stripped (B)".into(),
        "routines (nm)".into(),
        "routine code (B)".into(),
    ]];
    for (label, built, stripped, routines, bytes) in &rows {
        lines.push(vec![
            label.to_string(),
            built.to_string(),
            stripped.to_string(),
            routines.to_string(),
            bytes.to_string(),
        ]);
    }
    let (a, b) = (&rows[0], &rows[1]);
    lines.push(vec![
        "difference".into(),
        format!("{:+}", a.1 as i64 - b.1 as i64),
        format!("{:+}", a.2 as i64 - b.2 as i64),
        format!("{:+}", a.3 as i64 - b.3 as i64),
        format!("{:+}", a.4 as i64 - b.4 as i64),
    ]);
    report.push_str(&align(&lines));
    // The sweep worker's routines, if it has been built.
    let worker = opts
        .out
        .join("workers")
        .join(SPECIALISED)
        .join("sweep_worker");
    if let Ok(nm) = output(
        Command::new("nm")
            .args(["-S", "-C", "--defined-only"])
            .arg(&worker),
    ) {
        let (routines, bytes) = sweep::routine_bytes(&nm);
        let _ = writeln!(
            report,
            "sweep_worker (specialised build, every swept size on both paths): {routines} \
             routines, {bytes} bytes of routine code"
        );
    }
    print!("{report}");
    let txt = opts.out.join("binsize.txt");
    std::fs::write(&txt, &report).map_err(|e| format!("{}: {e}", txt.display()))?;
    Ok(())
}
