//! `[shader.slang]`: the options a Slang shader is compiled with. Every one is part of each
//! artifact's identity (`identity::Encoder::front_end`).

/// How Slang lays out matrices in memory (`-matrix-layout-row-major` /
/// `-matrix-layout-column-major`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatrixLayout {
    /// Slang's own default.
    #[default]
    RowMajor,
    /// What GLSL-style engines (and the public Vulkan samples) ask for.
    ColumnMajor,
}

impl MatrixLayout {
    /// Every layout, by [`MatrixLayout::name`].
    pub const ALL: [MatrixLayout; 2] = [Self::RowMajor, Self::ColumnMajor];

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::RowMajor => "row_major",
            Self::ColumnMajor => "column_major",
        }
    }

    /// Parses the manifest spelling.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|layout| layout.name() == name)
    }
}

/// Slang's optimization level (`-O0` .. `-O3`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SlangOptimization {
    /// `-O0`.
    None,
    /// `-O1`, Slang's default.
    #[default]
    Default,
    /// `-O2`.
    High,
    /// `-O3`.
    Maximal,
}

impl SlangOptimization {
    /// Every level, by [`SlangOptimization::name`].
    pub const ALL: [SlangOptimization; 4] = [Self::None, Self::Default, Self::High, Self::Maximal];

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Default => "default",
            Self::High => "high",
            Self::Maximal => "maximal",
        }
    }

    /// Parses the manifest spelling.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.name() == name)
    }

    /// The level as Slang's API numbers it (`SlangOptimizationLevel`).
    pub fn level(self) -> u32 {
        match self {
            Self::None => 0,
            Self::Default => 1,
            Self::High => 2,
            Self::Maximal => 3,
        }
    }
}

/// A Slang shader's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlangOptions {
    /// `matrix_layout = "row_major" | "column_major"`.
    pub matrix_layout: MatrixLayout,
    /// `optimization = "none" | "default" | "high" | "maximal"`.
    pub optimization: SlangOptimization,
}
