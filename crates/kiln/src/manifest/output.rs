//! `[output]`: how a build lays out its outputs. Never part of any artifact's identity: a
//! change of layout rewrites the output directory, never compiles anything.

use super::error::{Context, ManifestError};
use serde::Deserialize;
use toml::Spanned;

/// Where a build puts its outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutputLayout {
    /// One file per (variant, target), and `index.json` (the default).
    #[default]
    Loose,
    /// The loose files, and one pack per target (`<target>.kpack`, read by `kiln-runtime`).
    Both,
}

impl OutputLayout {
    /// Whether a build writes one pack per target.
    pub fn packs(self) -> bool {
        matches!(self, Self::Both)
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Loose => "loose",
            Self::Both => "both",
        }
    }
}

/// `[output]`, checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OutputSettings {
    /// `layout = "loose" | "both"`.
    pub layout: OutputLayout,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOutput {
    layout: Option<Spanned<String>>,
}

impl Context<'_> {
    pub(super) fn output(&self, raw: &RawOutput) -> Result<OutputSettings, ManifestError> {
        let mut settings = OutputSettings::default();
        if let Some(layout) = &raw.layout {
            settings.layout = match layout.get_ref().as_str() {
                "loose" => OutputLayout::Loose,
                "both" => OutputLayout::Both,
                other => {
                    return Err(self.error(
                        Some(layout.span()),
                        format!(
                            "unknown output layout `{other}`: expected \"loose\" (one file per \
                             variant and target) or \"both\" (those and one pack per target)"
                        ),
                    ))
                }
            };
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_manifests::{parse, LIT};
    use super::OutputLayout;

    #[test]
    fn the_layout_is_loose_unless_the_manifest_asks_for_packs() {
        assert_eq!(parse(LIT).unwrap().output.layout, OutputLayout::Loose);
        let both = format!("{LIT}\n[output]\nlayout = \"both\"\n");
        assert_eq!(parse(&both).unwrap().output.layout, OutputLayout::Both);
        let bad = format!("{LIT}\n[output]\nlayout = \"zip\"\n");
        let e = parse(&bad).unwrap_err();
        assert!(e.message.contains("unknown output layout `zip`"), "{e}");
        assert_eq!(e.line, bad.lines().count(), "{e:?}");
        let e = parse(&format!("{LIT}\n[output]\nformat = \"x\"\n")).unwrap_err();
        assert!(e.message.contains("format"), "{e}");
    }
}
