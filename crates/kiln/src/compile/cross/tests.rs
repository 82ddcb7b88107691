//! The structural SPIR-V check and entry-point selection, without a translator.

use super::*;

/// A minimal module header (SPIR-V 1.0, ID bound 8) followed by `stream`.
fn module(stream: &[u32]) -> Vec<u32> {
    let mut words = vec![0x0723_0203, 0x0001_0000, 0, 8, 0];
    words.extend_from_slice(stream);
    words
}

fn check_message(words: &[u32]) -> String {
    match words::check(words) {
        Ok(()) => panic!("{words:x?} passed the check"),
        Err(e) => {
            assert_eq!(e.phase, CompilePhase::Parse);
            e.message
        }
    }
}

#[test]
fn whole_instructions_pass_the_check() {
    // OpCapability Shader (2 words), OpMemoryModel Logical GLSL450 (3 words).
    assert_eq!(
        words::check(&module(&[0x0002_0011, 1, 0x0003_000e, 0, 1])),
        Ok(())
    );
    assert_eq!(words::check(&module(&[])), Ok(()));
}

#[test]
fn broken_words_are_refused_with_the_reason() {
    assert!(check_message(&[]).contains("0 words is shorter than the 5-word SPIR-V header"));
    assert!(check_message(&[0x0723_0203, 0x0001_0000]).contains("2 words"));
    let mut swapped = module(&[]);
    swapped[0] = 0x0302_2307;
    assert!(check_message(&swapped).contains("byte-swapped"));
    let mut foreign = module(&[]);
    foreign[0] = 0xdead_beef;
    assert!(check_message(&foreign).contains("0xdeadbeef"));
    let mut future = module(&[]);
    future[1] = 0x0002_0000;
    assert!(check_message(&future).contains("version 2.0"));
    let mut huge = module(&[]);
    huge[3] = u32::MAX;
    assert!(check_message(&huge).contains("ID bound 4294967295"));
    // A zero word count would never advance.
    assert!(check_message(&module(&[0x0002_0011, 1, 0x0000_0011]))
        .contains("instruction at word 7 has a word count of 0"));
    // The last instruction claims more words than remain.
    assert!(check_message(&module(&[0x0002_0011, 1, 0x0004_000e, 0, 1]))
        .contains("instruction at word 7 needs 4 words; the module ends after 3"));
}

#[test]
fn an_entry_is_picked_by_name_and_stage() {
    let entries = vec![
        ("main".to_owned(), "Vertex".to_owned(), 1, true),
        ("main".to_owned(), "Fragment".to_owned(), 2, false),
        ("other".to_owned(), "Vertex".to_owned(), 3, true),
    ];
    assert_eq!(pick_entry(&entries, "main", Some(Stage::Vertex)), Ok(1));
    let missing = pick_entry(&entries, "absent", Some(Stage::Vertex)).unwrap_err();
    assert_eq!(missing.phase, CompilePhase::Parse);
    assert!(
        missing
            .message
            .contains("no vertex entry point named `absent`")
            && missing.message.contains("`main` (Fragment)"),
        "{}",
        missing.message
    );
    // Without a stage, two entries of one name are ambiguous.
    let both: Vec<_> = entries
        .iter()
        .map(|(n, s, h, _)| (n.clone(), s.clone(), *h, true))
        .collect();
    let ambiguous = pick_entry(&both, "main", None).unwrap_err();
    assert!(
        ambiguous.message.contains("name the stage"),
        "{}",
        ambiguous.message
    );
    assert_eq!(pick_entry(&both, "other", None), Ok(3));
}

#[test]
fn spirv_is_its_own_artifact_and_needs_no_translator() {
    assert_eq!(Translator::for_target(Target::Spirv), None);
    assert_eq!(version(Target::Spirv), "");
    let words = module(&[0x0002_0011, 1]);
    let bytes = from_spirv(
        &words,
        Stage::Vertex,
        "main",
        &TargetConfig::new(Target::Spirv),
    );
    let expected: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(bytes, Ok(expected));
}

#[test]
fn each_target_names_its_translator_and_exact_version() {
    assert_eq!(Translator::for_target(Target::Wgsl), Some(Translator::Naga));
    assert_eq!(
        version(Target::Wgsl),
        format!("naga {}", crate::compile::NAGA_VERSION)
    );
    for target in [Target::Msl, Target::Hlsl, Target::Glsl] {
        assert_eq!(Translator::for_target(target), Some(Translator::SpirvCross));
        let version = version(target);
        if cfg!(feature = "glslang") {
            // The vendored SPIRV-Cross commit is part of spirv-cross-sys's version.
            assert!(version.starts_with("spirv-cross-sys 0."), "{version}");
            assert!(version.contains('+'), "{version}");
        } else {
            assert_eq!(version, "spirv-cross (not built)");
        }
    }
}

#[test]
fn a_translator_asked_for_a_target_it_cannot_write_says_so() {
    let words = module(&[]);
    let wgsl = TargetConfig::new(Target::Wgsl);
    let e = translate(Translator::SpirvCross, &words, "main", None, &wgsl).unwrap_err();
    assert_eq!(e.phase, CompilePhase::Emit);
    assert!(
        e.message
            .contains("SPIRV-Cross does not translate SPIR-V to wgsl"),
        "{}",
        e.message
    );
    let msl = TargetConfig::new(Target::Msl);
    let e = translate(Translator::SpirvCross, &words, "main", None, &msl).unwrap_err();
    if cfg!(feature = "glslang") {
        // Built: the empty module has no entry point.
        assert!(
            e.message.contains("no entry point in the SPIR-V module"),
            "{}",
            e.message
        );
    } else {
        assert!(
            e.message.contains("rebuild with the default features"),
            "{}",
            e.message
        );
    }
}

/// The one stage table: which stage reaches which target from SPIR-V, for the translator kiln
/// uses per target; a refused pair is refused by `translate` before any translator runs.
#[test]
fn the_stage_table_allows_what_the_translators_write() {
    let allowed = |stage: Stage| -> Vec<Target> {
        Target::ALL
            .into_iter()
            .filter(|&target| match Translator::for_target(target) {
                None => true,
                Some(translator) => stage_support(translator, stage, target).is_ok(),
            })
            .collect()
    };
    use Target::{Glsl, Hlsl, Msl, Reflection, Spirv, Wgsl};
    for stage in [Stage::Vertex, Stage::Fragment, Stage::Compute] {
        assert_eq!(
            allowed(stage),
            [Spirv, Msl, Hlsl, Glsl, Wgsl, Reflection],
            "{stage}"
        );
    }
    assert_eq!(allowed(Stage::Geometry), [Spirv, Glsl, Reflection]);
    assert_eq!(allowed(Stage::TessControl), [Spirv, Msl, Glsl, Reflection]);
    assert_eq!(
        allowed(Stage::TessEvaluation),
        [Spirv, Msl, Glsl, Reflection]
    );
    for stage in [
        Stage::Task,
        Stage::Mesh,
        Stage::RayGeneration,
        Stage::Callable,
    ] {
        assert_eq!(allowed(stage), [Spirv, Reflection], "{stage}");
        // Reflection reads any stage, whichever translator is asked.
        for translator in Translator::ALL {
            assert_eq!(stage_support(translator, stage, Reflection), Ok(()));
        }
    }
    // naga, asked directly, reads only its own stages.
    assert!(stage_support(Translator::Naga, Stage::TessControl, Target::Glsl).is_err());

    // A refused pair fails before the words reach a translator.
    let e = translate(
        Translator::SpirvCross,
        &module(&[]),
        "main",
        Some(Stage::Geometry),
        &TargetConfig::new(Target::Msl),
    )
    .unwrap_err();
    assert_eq!(e.phase, CompilePhase::Unsupported);
    assert_eq!(
        e.message,
        "geometry shaders are unsupported by target msl (Metal has no geometry shaders); only spirv builds them"
    );
}

/// A module declaring untyped pointers (what glslang writes for `GL_EXT_descriptor_heap`)
/// made SPIRV-Cross assert and abort the whole build (the public samples'
/// `descriptorheapuntyped/cube.frag`): it is refused before SPIRV-Cross reads it, for every
/// target SPIRV-Cross writes, and the process lives on.
#[cfg(feature = "glslang")]
#[test]
fn a_module_spirv_cross_cannot_read_is_refused_not_aborted() {
    // OpCapability Shader, OpCapability UntypedPointersKHR (4473), OpMemoryModel.
    let words = module(&[0x0002_0011, 1, 0x0002_0011, 4473, 0x0003_000e, 0, 1]);
    for target in [Target::Msl, Target::Hlsl, Target::Glsl] {
        let e = translate(
            Translator::SpirvCross,
            &words,
            "main",
            None,
            &TargetConfig::new(target),
        )
        .unwrap_err();
        assert_eq!(e.phase, CompilePhase::Unsupported, "{target}: {e}");
        assert!(e.message.contains("UntypedPointersKHR"), "{target}: {e}");
    }
}

/// Reflection needs SPIRV-Cross: without the `glslang` feature each reflection pair fails
/// alone, saying how to build, and never panics.
#[test]
fn reflection_without_spirv_cross_fails_saying_how_to_build() {
    let wgsl = "@fragment fn main() -> @location(0) vec4<f32> { return vec4<f32>(1.0); }";
    let result = crate::compile::compile(
        crate::compile::SourceLanguage::Wgsl,
        wgsl,
        Stage::Fragment,
        "main",
        &TargetConfig::new(Target::Reflection),
    );
    if cfg!(feature = "glslang") {
        let json = String::from_utf8(result.expect("reflected")).expect("UTF-8");
        assert!(json.contains(r#""stage":"fragment""#), "{json}");
    } else {
        let e = result.unwrap_err();
        assert_eq!(e.phase, CompilePhase::Unsupported, "{e}");
        assert!(
            e.message
                .contains("the reflection target needs kiln built with the `glslang` feature"),
            "{e}"
        );
    }
}
