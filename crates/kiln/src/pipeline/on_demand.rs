//! Variants asked for by name while a project is open (`kiln serve`): any legal keyword set
//! of a shader, listed in the manifest or not, through the same queries, variant cache,
//! per-build dedup and store as a build. Concurrent requests for one variant execute its
//! query once (the engine's single flight); what they compile is saved to the store before
//! the answer, so a server killed afterwards has lost nothing.

use super::engine::queries::{variant_key, ArtifactsQ, RevisionQ};
use super::engine::scope::{Revisions, VariantScope};
use super::engine::services::Outcome;
use super::{Diagnostic, Project, VariantId};
use crate::compile::Target;
use crate::manifest::KeywordSetError;
use crate::store::ContentKey;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// One target's artifact of one variant, asked for by name.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The variant, its keyword set canonical.
    pub variant: VariantId,
    /// The target asked for.
    pub target: Target,
    /// The artifact, verified against its blake3.
    pub bytes: Arc<[u8]>,
    /// blake3 of `bytes`: equal before and after an edit exactly when the artifact is.
    pub hash: ContentKey,
    /// The variant's 12-hex digest at the shader's current revision (it moves with every
    /// edit of the shader's inputs, even one that leaves the artifact unchanged).
    pub digest: String,
    /// How the artifact was obtained: `None` when the engine already held it.
    pub outcome: Option<Outcome>,
}

/// Why a variant asked for by name has no artifact.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No shader of that name.
    #[error("no shader `{shader}` (shaders: {})", names(known))]
    UnknownShader {
        /// The name asked for.
        shader: String,
        /// The manifest's shaders.
        known: Vec<String>,
    },
    /// The shader has no pass of that name.
    #[error("shader `{shader}` has no pass `{pass}` (passes: {})", names(known))]
    UnknownPass {
        /// The shader.
        shader: String,
        /// The name asked for.
        pass: String,
        /// The shader's passes.
        known: Vec<String>,
    },
    /// The manifest builds no target of that name.
    #[error("the project builds no target `{target}` (targets: {})", names(known))]
    UnknownTarget {
        /// The name asked for.
        target: String,
        /// The manifest's targets.
        known: Vec<String>,
    },
    /// The keyword set is not one the shader may be compiled with.
    #[error(transparent)]
    KeywordSet(#[from] KeywordSetError),
    /// The variant does not compile (for this target, or at all): the located diagnostics.
    #[error("{variant} does not compile for {target}: {}", first_message(.diagnostics))]
    Failed {
        /// The variant.
        variant: VariantId,
        /// The target asked for.
        target: &'static str,
        /// Every error, each naming its file, line and variant.
        diagnostics: Vec<Diagnostic>,
    },
    /// The engine could not answer (a cycle, a contained panic).
    #[error("{variant}: {source}")]
    Engine {
        /// The variant.
        variant: VariantId,
        /// What happened.
        source: kiln_incr::QueryError,
    },
}

/// What a fetch compiled, to be saved to the store before it is answered.
#[derive(Default)]
struct Saves {
    compiled: bool,
    costs: Vec<(ContentKey, u64)>,
}

impl Saves {
    fn note(&mut self, outcome: Option<Outcome>, costs: &[(ContentKey, u64)]) {
        self.compiled |= outcome == Some(Outcome::Compiled);
        self.costs.extend_from_slice(costs);
    }
}

fn first_message(diagnostics: &[Diagnostic]) -> &str {
    diagnostics.first().map_or("", |d| d.message.as_str())
}

/// A variant asked for by name: spelled as a client sends it, checked by [`Project::fetch`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VariantRequest {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Keywords in any order, repeats and `_` allowed.
    pub keywords: Vec<String>,
    /// Target name (`spirv`, `msl`, ...).
    pub target: String,
}

/// What changed since the last [`Project::prepare`] (or build).
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// Project files whose contents changed.
    pub changed_files: Vec<PathBuf>,
    /// Whether the manifest changed.
    pub manifest_changed: bool,
    /// What changed in it, field by field.
    pub manifest_changes: Vec<crate::manifest::ManifestChange>,
}

impl Project {
    /// Makes the project ready for [`Project::fetch`] without building: every file of every
    /// include closure read into the engine, and the variant cache's entries of shaders
    /// whose revision moved dropped. Called after opening and after each batch of changes
    /// (a build does the same in its plan). Returns what changed since the last call.
    pub fn prepare(&mut self) -> Result<Prepared, super::ProjectError> {
        if self.root_gone() {
            return Err(super::ProjectError::RootGone {
                root: self.manifest.root.clone(),
            });
        }
        self.discover_files();
        // Each batch of changes is one "build" for the dedup table, which would otherwise
        // grow with every compile a long-running server makes.
        self.db.context().start_build();
        let revisions = self.revisions();
        // The pinned artifacts help a build that runs every variant; here nothing runs yet.
        drop(self.invalidate_stale_revisions(&revisions));
        Ok(Prepared {
            changed_files: std::mem::take(&mut self.changed_files)
                .into_iter()
                .collect(),
            manifest_changed: std::mem::take(&mut self.manifest_changed),
            manifest_changes: std::mem::take(&mut self.manifest_changes),
        })
    }

    /// One target's artifact of any legal variant (see [`crate::manifest::ShaderSpec::keyword_set`]):
    /// from the engine's memo, the variant cache or the store, else compiled (every target
    /// at once, as a build does) and saved. The project must be prepared (see
    /// [`Project::prepare`]) or built since its files last changed.
    pub fn fetch(&self, request: &VariantRequest) -> Result<Fetched, FetchError> {
        // On the pool: its workers have the stack deep compiles need.
        self.pool.install(|| {
            let (fetched, saves) = self.fetch_unsaved(request);
            self.save(vec![saves]);
            fetched
        })
    }

    /// [`Project::fetch`] of many requests on the pool, what they compiled saved in one
    /// batch at the end; the results in request order.
    pub fn fetch_all(&self, requests: &[VariantRequest]) -> Vec<Result<Fetched, FetchError>> {
        self.pool.install(|| {
            let (results, saves): (Vec<_>, Vec<_>) = requests
                .par_iter()
                .map(|request| self.fetch_unsaved(request))
                .unzip();
            self.save(saves);
            results
        })
    }

    fn fetch_unsaved(&self, request: &VariantRequest) -> (Result<Fetched, FetchError>, Saves) {
        let mut saves = Saves::default();
        let fetched = self
            .resolve_request(request)
            .and_then(|(variant, target)| self.fetch_variant(variant, target, &mut saves));
        (fetched, saves)
    }

    /// Writes what the fetches compiled to the store, before they are answered: a server
    /// killed right after still has it.
    fn save(&self, saves: Vec<Saves>) {
        if !saves.iter().any(|s| s.compiled) {
            return;
        }
        let costs: Vec<(ContentKey, u64)> = saves.into_iter().flat_map(|s| s.costs).collect();
        if let Some(warning) = self.db.context().flush_saves(&costs, false) {
            tracing::warn!("{}", warning.message);
        }
    }

    /// The request's variant with its canonical keyword set, and its target.
    fn resolve_request(&self, request: &VariantRequest) -> Result<(VariantId, Target), FetchError> {
        let manifest = &self.manifest;
        let spec = manifest
            .shaders
            .iter()
            .find(|s| s.name == request.shader)
            .ok_or_else(|| FetchError::UnknownShader {
                shader: request.shader.clone(),
                known: manifest.shaders.iter().map(|s| s.name.clone()).collect(),
            })?;
        if !spec.passes.iter().any(|p| p.name == request.pass) {
            return Err(FetchError::UnknownPass {
                shader: request.shader.clone(),
                pass: request.pass.clone(),
                known: spec.passes.iter().map(|p| p.name.clone()).collect(),
            });
        }
        let target = manifest
            .targets
            .iter()
            .map(|t| t.target())
            .find(|t| t.name() == request.target)
            .ok_or_else(|| FetchError::UnknownTarget {
                target: request.target.clone(),
                known: manifest
                    .targets
                    .iter()
                    .map(|t| t.target().name().to_owned())
                    .collect(),
            })?;
        let set = spec.keyword_set(request.keywords.iter().map(String::as_str))?;
        let variant = VariantId {
            shader: Arc::from(spec.name.as_str()),
            pass: Arc::from(request.pass.as_str()),
            keywords: set.into_iter().map(Arc::from).collect(),
        };
        Ok((variant, target))
    }

    fn fetch_variant(
        &self,
        variant: VariantId,
        target: Target,
        saves: &mut Saves,
    ) -> Result<Fetched, FetchError> {
        let fail = |variant: &VariantId, diagnostics: Vec<Diagnostic>| FetchError::Failed {
            variant: variant.clone(),
            target: target.name(),
            diagnostics,
        };
        let engine = |variant: &VariantId, source| FetchError::Engine {
            variant: variant.clone(),
            source,
        };
        let revision = match self.db.get::<RevisionQ>(&variant.shader) {
            Ok(Ok(revision)) => revision,
            Ok(Err(diagnostic)) => return Err(fail(&variant, vec![diagnostic])),
            Err(e) => return Err(engine(&variant, e)),
        };
        let revisions = Arc::new(Revisions::new([(variant.shader.clone(), revision)]));
        let artifacts = self.db.query::<ArtifactsQ>();
        let (result, mut made) = VariantScope::run(&revisions, || artifacts.get(&variant));
        saves.note(made.outcome, &made.costs);
        let artifacts = match result {
            Ok(Ok(artifacts)) => artifacts,
            Ok(Err(failures)) => return Err(fail(&variant, failures.to_vec())),
            Err(e) => return Err(engine(&variant, e)),
        };
        let Some(recorded) = artifacts.outputs.iter().find(|a| a.target == target) else {
            let mine = artifacts
                .failed
                .iter()
                .filter(|d| d.target.is_none_or(|t| t == target))
                .cloned()
                .collect();
            return Err(fail(&variant, mine));
        };
        let bytes = match made.fresh.take() {
            Some(fresh) => Some(fresh),
            None => {
                let (bytes, more) = self.bytes_of(&variant, &revisions);
                saves.note(more.outcome, &more.costs);
                made.outcome = made.outcome.or(more.outcome);
                bytes
            }
        };
        let bytes = bytes
            .and_then(|all| {
                let at = all.outputs.iter().position(|(t, _)| *t == target)?;
                (all.hashes[at] == recorded.hash).then(|| Arc::clone(&all.outputs[at].1))
            })
            .ok_or_else(|| {
                fail(
                    &variant,
                    vec![Diagnostic::error(format!(
                        "the store lost the {} artifact of {variant} and it could not be made again",
                        target.name()
                    ))],
                )
            })?;
        let digest = variant_key(&variant, revision.short())
            .map(|key| key.digest())
            .unwrap_or_default();
        Ok(Fetched {
            variant,
            target,
            bytes,
            hash: recorded.hash,
            digest,
            outcome: made.outcome,
        })
    }
}

fn names(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}
