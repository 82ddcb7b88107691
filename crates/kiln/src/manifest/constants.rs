//! Specialization constants: `constants` of a shader or a pass, and `keyword_constants`,
//! which no two keywords of one variant may disagree on.

use super::error::{Context, ManifestError};
use super::keywords::{check_keyword, list};
use super::shader::{constant_conflict, ConstantConflict, RawShader};
use crate::compile::{ConstantValue, Constants};
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

impl Context<'_> {
    /// A `constants` table: name or `constant_id` -> number or boolean.
    pub(super) fn constants(
        &self,
        raw: &BTreeMap<String, Spanned<toml::Value>>,
        whose: &str,
    ) -> Result<Constants, ManifestError> {
        let mut constants = Constants::new();
        for (key, value) in raw {
            self.check_constant_key(key, value, whose)?;
            let number = self.constant_value(key, value, whose)?;
            constants.insert(key.clone(), ConstantValue(number));
        }
        Ok(constants)
    }

    /// A constant is named by an identifier or by its `constant_id`, a `u16`.
    fn check_constant_key(
        &self,
        key: &str,
        value: &Spanned<toml::Value>,
        whose: &str,
    ) -> Result<(), ManifestError> {
        let is_id = !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit());
        if is_id {
            key.parse::<u16>().map_err(|_| {
                self.error(
                    Some(value.span()),
                    format!("constant id `{key}` of {whose} is out of range (0 ..= 65535)"),
                )
            })?;
        } else {
            check_keyword(key).map_err(|why| {
                self.error(
                    Some(value.span()),
                    format!("constant `{key}` of {whose}: a name {why}, or an id must be a number"),
                )
            })?;
        }
        Ok(())
    }

    /// The constant's value as naga's pipeline constants take it: an `f64`.
    fn constant_value(
        &self,
        key: &str,
        value: &Spanned<toml::Value>,
        whose: &str,
    ) -> Result<f64, ManifestError> {
        match value.get_ref() {
            toml::Value::Integer(i) => {
                let f = *i as f64;
                // Beyond 2^53 an integer has no exact f64, naga's pipeline-constant type.
                if f as i64 != *i || i.unsigned_abs() > 1 << 53 {
                    return Err(self.error(
                        Some(value.span()),
                        format!("constant `{key}` of {whose}: {i} cannot be represented exactly"),
                    ));
                }
                Ok(f)
            }
            toml::Value::Float(f) if f.is_finite() => Ok(*f),
            toml::Value::Boolean(b) => Ok(f64::from(u8::from(*b))),
            _ => Err(self.error(
                Some(value.span()),
                format!("constant `{key}` of {whose} must be a finite number or a boolean"),
            )),
        }
    }

    /// Per-keyword constants, and no variant whose keywords disagree on a constant.
    pub(super) fn keyword_constants(
        &self,
        shader: &RawShader,
        keywords: &BTreeSet<String>,
        variants: &[Vec<String>],
    ) -> Result<BTreeMap<String, Constants>, ManifestError> {
        let name = shader.name.get_ref();
        let mut by_keyword = BTreeMap::new();
        for (keyword, table) in &shader.keyword_constants {
            if !keywords.contains(keyword) {
                return Err(self.error(
                    Some(table.span()),
                    format!(
                        "`keyword_constants` of shader `{name}` names unknown keyword `{keyword}` (declared: {})",
                        list(keywords)
                    ),
                ));
            }
            let whose = format!("shader `{name}` with keyword `{keyword}`");
            by_keyword.insert(keyword.clone(), self.constants(table.get_ref(), &whose)?);
        }
        for variant in variants {
            self.check_keywords_agree(shader, variant, &by_keyword)?;
        }
        Ok(by_keyword)
    }

    /// Two keywords of one variant giving one constant different values would make the
    /// result depend on the order they are applied in.
    fn check_keywords_agree(
        &self,
        shader: &RawShader,
        variant: &[String],
        by_keyword: &BTreeMap<String, Constants>,
    ) -> Result<(), ManifestError> {
        let name = shader.name.get_ref();
        let Some(conflict) = constant_conflict(by_keyword, variant.iter().map(String::as_str))
        else {
            return Ok(());
        };
        let ConstantConflict {
            first,
            second,
            constant,
            values: (v, value),
        } = conflict;
        Err(self.error(
            shader.keyword_constants.get(second).map(|t| t.span()),
            format!(
                "shader `{name}`, variant [{}]: keywords `{first}` and `{second}` give constant `{constant}` different values ({v} and {value})",
                variant.join(";")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::test_manifests::{parse, LIT};

    #[test]
    fn constants_are_read_per_shader_pass_and_keyword() {
        use crate::compile::ConstantValue;
        let text = format!(
            "{LIT}constants = {{ EXPOSURE = 1.5, \"3\" = 2, SHARP = true }}\n\n[shader.keyword_constants.FOG]\nEXPOSURE = 0.5\n"
        )
        .replace(
            "entry = \"fs_main\"\n",
            "entry = \"fs_main\"\nconstants = { \"3\" = 4 }\n",
        );
        // `constants` after a pass table belongs to that pass: move it under the shader.
        let text = text.replace(
            "[shader.passes.Depth]\nstage = \"vertex\"\nentry = \"vs_main\"\nconstants = { EXPOSURE = 1.5, \"3\" = 2, SHARP = true }",
            "[shader.passes.Depth]\nstage = \"vertex\"\nentry = \"vs_main\"",
        );
        let text = text.replace(
            "variants = [",
            "constants = { EXPOSURE = 1.5, \"3\" = 2, SHARP = true }\nvariants = [",
        );
        let m = parse(&text).unwrap();
        let lit = &m.shaders[0];
        let forward = lit.passes.iter().find(|p| p.name == "Forward").unwrap();
        let depth = lit.passes.iter().find(|p| p.name == "Depth").unwrap();
        let c = lit.constants_for(depth, ["SKIN"]);
        assert_eq!(c["EXPOSURE"], ConstantValue(1.5));
        assert_eq!(c["3"], ConstantValue(2.0));
        assert_eq!(c["SHARP"], ConstantValue(1.0));
        let c = lit.constants_for(forward, ["FOG"]);
        assert_eq!(c["3"], ConstantValue(4.0), "the pass's value wins");
        assert_eq!(
            c["EXPOSURE"],
            ConstantValue(0.5),
            "the keyword's value wins"
        );

        let e = parse(&text.replace("EXPOSURE = 0.5", "EXPOSURE = \"bright\"")).unwrap_err();
        assert!(e.message.contains("must be a finite number"), "{e}");
        let e =
            parse(&text.replace("keyword_constants.FOG", "keyword_constants.RAIN")).unwrap_err();
        assert!(e.message.contains("unknown keyword `RAIN`"), "{e}");
        let e = parse(&text.replace("\"3\" = 2", "\"70000\" = 2")).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        // Two keywords of one variant that disagree.
        let clash = format!("{text}\n[shader.keyword_constants.SKIN]\nEXPOSURE = 0.25\n");
        let e = parse(&clash).unwrap_err();
        assert!(e.message.contains("different values"), "{e}");
        assert!(
            e.message.contains("FOG") && e.message.contains("SKIN"),
            "{e}"
        );
    }
}
