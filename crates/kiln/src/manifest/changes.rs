//! What changed between two manifests, field by field, so that a rebuild can say which part
//! of `kiln.toml` made it (`shader `Lit`: defines`), not only that the file changed.

use super::{Manifest, ShaderSpec};
use std::fmt;

/// One changed part of the manifest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManifestChange {
    /// The shader it concerns; `None` for a project-wide field.
    pub shader: Option<String>,
    /// The field: `targets`, `limits`, `output`, `cache`, `variants_from`; for a shader
    /// `added`, `removed`, `keywords`, `variants`, `passes`, `defines`, `include_dirs`,
    /// `constants`, `keyword_constants`, `axes`.
    pub field: &'static str,
}

impl fmt::Display for ManifestChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shader {
            Some(shader) => write!(f, "shader `{shader}`: {}", self.field),
            None => f.write_str(self.field),
        }
    }
}

/// The changes from `old` to `new`, project-wide fields first, then shaders in `new`'s
/// order, then the removed ones.
pub fn changes(old: &Manifest, new: &Manifest) -> Vec<ManifestChange> {
    let mut all = Vec::new();
    let mut global = |changed: bool, field| {
        if changed {
            all.push(ManifestChange {
                shader: None,
                field,
            });
        }
    };
    global(old.targets != new.targets, "targets");
    global(old.limits != new.limits, "limits");
    global(old.output != new.output, "output");
    global(old.cache != new.cache, "cache");
    global(old.variants_from != new.variants_from, "variants_from");
    for shader in &new.shaders {
        match old.shaders.iter().find(|s| s.name == shader.name) {
            None => all.push(ManifestChange {
                shader: Some(shader.name.clone()),
                field: "added",
            }),
            Some(before) => {
                for field in shader_fields(before, shader) {
                    all.push(ManifestChange {
                        shader: Some(shader.name.clone()),
                        field,
                    });
                }
            }
        }
    }
    for shader in &old.shaders {
        if !new.shaders.iter().any(|s| s.name == shader.name) {
            all.push(ManifestChange {
                shader: Some(shader.name.clone()),
                field: "removed",
            });
        }
    }
    all
}

/// The fields of one shader that differ. Destructured whole, so that a new field fails to
/// compile here until it is compared.
fn shader_fields(old: &ShaderSpec, new: &ShaderSpec) -> Vec<&'static str> {
    let ShaderSpec {
        name: _,
        keywords,
        variants,
        passes,
        defines,
        include_dirs,
        constants,
        keyword_constants,
        axes,
    } = new;
    let mut fields = Vec::new();
    let mut compare = |changed: bool, field| {
        if changed {
            fields.push(field);
        }
    };
    compare(*keywords != old.keywords, "keywords");
    compare(*axes != old.axes, "axes");
    compare(*variants != old.variants, "variants");
    compare(*passes != old.passes, "passes");
    compare(*defines != old.defines, "defines");
    compare(*include_dirs != old.include_dirs, "include_dirs");
    compare(*constants != old.constants, "constants");
    compare(
        *keyword_constants != old.keyword_constants,
        "keyword_constants",
    );
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::test_manifests::{parse, LIT};

    #[test]
    fn a_define_edit_is_named_with_its_shader_and_nothing_else() {
        let old = parse(LIT).unwrap();
        let mut new = old.clone();
        let lit = std::sync::Arc::make_mut(&mut new.shaders[0]);
        lit.defines.insert("QUALITY".into(), "2".into());
        let name = lit.name.clone();
        let found = changes(&old, &new);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].to_string(), format!("shader `{name}`: defines"));
        assert!(changes(&old, &old).is_empty());
        let mut fewer = old.clone();
        let removed = fewer.shaders.remove(0);
        fewer.targets.pop();
        let found: Vec<String> = changes(&old, &fewer)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "targets".to_string(),
                format!("shader `{}`: removed", removed.name)
            ]
        );
    }
}
