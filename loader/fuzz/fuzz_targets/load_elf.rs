//! Feeds arbitrary bytes to everything the emulator does with a program
//! file: loading, symbolizing, looking up addresses and laying out a stack.
//! Any panic is a bug. Seed the corpus with a few real static binaries.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let image = loader::load_elf(data, 0x5555_5555_4000);
    let bias = image.as_ref().map_or(0, |image| image.load_bias);
    let symbolizer = loader::Symbolizer::new(data, bias);
    if let Ok(image) = &image {
        for pc in [image.entry, image.lowest, image.highest.wrapping_sub(1)] {
            let _ = symbolizer.lookup(pc);
        }
        let argv = [b"prog".to_vec()];
        let spec = loader::StackSpec {
            argv: &argv,
            envp: &[],
            execfn: b"prog",
            platform: b"x86_64",
            random: [0; 16],
            hwcap: 0,
            hwcap2: 0,
            pagesz: 4096,
            clktck: 100,
            uid: 0,
            euid: 0,
            gid: 0,
            egid: 0,
            secure: 0,
            base: 0,
            minsigstksz: 2048,
        };
        let _ = loader::build_initial_stack(0x7fff_ffff_f000, &spec, image);
    }
    let _ = symbolizer.symbol_address("main");
    let _ = symbolizer.symbols().count();
});
