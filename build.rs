//! Links the `ferrite` binary as a position-dependent executable.
//!
//! Every ferrite process pays its start-up once per shard of a campaign, and a position-independent
//! `ferrite` starts by having the dynamic linker apply about 100,000 relative relocations (the
//! vtables and tables of Unicorn, Capstone and the Rust code), touching 2 MiB of relocation
//! entries and 1.5 MiB of data: some 3 ms of a 20 ms trivial run (docs/performance.md, "A
//! shard's fixed cost"). Linked at a fixed address, the linker resolves them at link time.
//! Nothing depends on where ferrite itself is loaded: guests live in Unicorn's address space.

fn main() {
    // Without it, cargo runs the script again whenever any file of the package changes.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-no-pie");
}
