//! Errors raised while building a variant key or a declared keyword set.

pub use crate::boundary::NameFault;

/// A variant key or a declared keyword set that cannot be built. Each variant names the
/// offending text; nothing is ever dropped silently.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The shader name is empty or holds `|`.
    #[error("invalid shader name `{shader}`: {fault}")]
    InvalidShader {
        /// The shader name as given.
        shader: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// The pass name is empty or holds `|`.
    #[error("invalid pass name `{pass}` in shader `{shader}`: {fault}")]
    InvalidPass {
        /// The shader the pass belongs to.
        shader: String,
        /// The pass name as given.
        pass: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// A keyword is empty or holds `;`, `|` or whitespace.
    #[error("invalid keyword `{keyword}` for {shader}/{pass}: {fault}")]
    InvalidKeyword {
        /// The shader of the key being built.
        shader: String,
        /// The pass of the key being built.
        pass: String,
        /// The keyword as given.
        keyword: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// A keyword declared for a shader is empty or holds `;`, `|` or whitespace.
    #[error("invalid keyword `{keyword}` declared by shader `{shader}`: {fault}")]
    InvalidDeclaredKeyword {
        /// The declaring shader.
        shader: String,
        /// The keyword as given.
        keyword: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// A keyword outside the shader's declared set.
    #[error(
        "unknown keyword `{keyword}` for {shader}/{pass}: shader `{shader}` declares [{declared}]"
    )]
    UnknownKeyword {
        /// The shader of the key being built.
        shader: String,
        /// The pass of the key being built.
        pass: String,
        /// The keyword as given.
        keyword: String,
        /// The shader's declared keywords, joined with `;`.
        declared: String,
    },
}
