//! Durability: how rarely an input is expected to change, used to skip verification.

/// How rarely an input changes. A memo's durability is the minimum over everything it
/// read; a write to a `Low` input never makes the engine look at memos whose durability
/// is `Medium` or `High` (they read no `Low` input).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Durability {
    /// Changes often (e.g. project sources being edited).
    #[default]
    Low,
    /// Changes sometimes (e.g. configuration).
    Medium,
    /// Rarely changes (e.g. system headers, compiler options).
    High,
}

impl Durability {
    pub(crate) const COUNT: usize = 3;
    pub(crate) const ALL: [Durability; Durability::COUNT] =
        [Durability::Low, Durability::Medium, Durability::High];

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
