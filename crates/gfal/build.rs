//! Compiles the C shim (src/shim.c) against the installed gfal2 headers, so gfal2's plugin
//! interface struct is laid out by the C compiler from gfal2's own declaration, and links
//! libgfal2, libgfal_transfer and glib (found with pkg-config).
//!
//! gfal2 takes the interface from `gfal_plugin_init` by value, and a cdylib exports only
//! functions Rust defines, so the Rust entry point must return a value of the struct's
//! exact size. That size is measured here: the compiler turns
//! `sizeof(gfal_plugin_interface)` into a constant in assembly, read back from the `.s`
//! file (no program is run, so this works when cross-compiling too). It goes to Rust as
//! `OUT_DIR/iface_size.rs` and to the shim as `LH_IFACE_SIZE`, where static asserts check
//! it against the struct again.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut build = cc::Build::new();
    for lib in ["gfal2", "gfal_transfer", "glib-2.0"] {
        match pkg_config::Config::new().probe(lib) {
            Ok(found) => {
                for dir in found.include_paths {
                    build.include(dir);
                }
                for (key, value) in found.defines {
                    build.define(&key, value.as_deref());
                }
            }
            Err(e) => fail(&format!(
                "longhaul-gfal needs gfal2's development files to build ({lib}: {e}).\n\
                 On Debian or Ubuntu: apt-get install libgfal2-dev pkg-config"
            )),
        }
    }
    let size = interface_size(&build, &out);
    std::fs::write(
        out.join("iface_size.rs"),
        format!(
            "/// `sizeof(gfal_plugin_interface)` in the installed gfal2 header (build.rs).\n\
             pub const IFACE_SIZE: usize = {size};\n"
        ),
    )
    .unwrap_or_else(|e| fail(&format!("cannot write iface_size.rs: {e}")));
    build
        .file("src/shim.c")
        .define("LH_IFACE_SIZE", size.to_string().as_str())
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-Werror=incompatible-pointer-types")
        .flag_if_supported("-Werror=implicit-function-declaration")
        .flag_if_supported("-Werror=int-conversion")
        .compile("longhaul_gfal_shim");
}

/// `sizeof(gfal_plugin_interface)`, from the compiler's assembly of a one-line probe.
fn interface_size(build: &cc::Build, out: &Path) -> usize {
    let probe = out.join("iface_probe.c");
    let asm = out.join("iface_probe.s");
    std::fs::write(
        &probe,
        "#include <gfal_plugins_api.h>\n\
         const unsigned long long lh_iface_size = sizeof(gfal_plugin_interface);\n",
    )
    .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", probe.display())));
    let mut cmd: Command = build.get_compiler().to_command();
    cmd.arg("-S").arg("-o").arg(&asm).arg(&probe);
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run the C compiler ({cmd:?}): {e}")));
    if !status.success() {
        fail(&format!(
            "the C compiler could not measure gfal_plugin_interface ({cmd:?})"
        ));
    }
    let text = std::fs::read_to_string(&asm)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", asm.display())));
    size_after_label(&text, "lh_iface_size").unwrap_or_else(|| {
        fail(&format!(
            "no size found after the label lh_iface_size in {}",
            asm.display()
        ))
    })
}

/// The number in the first data directive after `label:` (`.quad 456`, `.xword 456`,
/// `.8byte 456`).
fn size_after_label(asm: &str, label: &str) -> Option<usize> {
    let mut lines = asm.lines().map(str::trim);
    lines.find(|l| l.strip_suffix(':') == Some(label))?;
    for line in lines {
        let mut words = line.split_whitespace();
        let directive = words.next()?;
        if matches!(directive, ".quad" | ".xword" | ".8byte" | ".dword") {
            return words.next()?.parse().ok();
        }
        if !directive.starts_with('.') {
            return None;
        }
    }
    None
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(1);
}
