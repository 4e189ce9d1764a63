//! What a relayed pull of one share of a striped copy needs before it asks
//! (`longhaul_proto::stripe`): a source that knows stripes, and exactly the chunk size the
//! coordinator gave every pair (the shares number the same chunks only on one grid).

use longhaul_proto::stripe::Share;

use crate::cp::CpError;

/// Refuses the share's pull when the source lacks [`longhaul_proto::features::STRIPES`],
/// no chunk size was given, or this server's memory budget cut the chunks (`asked`,
/// `fitted`).
pub(super) fn check(
    share: Share,
    features: u64,
    (asked, fitted): (u64, u64),
    given: Option<u64>,
) -> Result<(), CpError> {
    if features & longhaul_proto::features::STRIPES == 0 {
        return Err(CpError::Stopped {
            reason: format!(
                "the source runs an older longhaul without striped copies ({share} was asked); \
             upgrade it, or copy without stripes"
            ),
        });
    }
    if given != Some(asked) {
        return Err(CpError::Stopped {
            reason: format!("{share} of a striped copy needs the chunk size every pair uses"),
        });
    }
    if fitted != asked {
        return Err(CpError::Stopped {
            reason: format!(
                "this server's memory budget (serve --memory) holds chunks of {} MiB, not the \
             striped copy's {} MiB; give the copy smaller --chunk or fewer --streams",
                fitted >> 20,
                asked >> 20
            ),
        });
    }
    Ok(())
}
