//! The random loss process: Bernoulli or Gilbert-Elliott, stepped once per segment.

use crate::config::LossModel;
use crate::rng::{Chance, Rng};

/// The state of a loss model between segments.
#[derive(Debug, Clone)]
pub(crate) enum LossProcess {
    None,
    Bernoulli(Chance),
    GilbertElliott {
        to_bad: Chance,
        to_good: Chance,
        loss_bad: Chance,
        loss_good: Chance,
        bad: bool,
    },
}

impl LossProcess {
    pub(crate) fn new(model: &LossModel) -> Self {
        match *model {
            LossModel::None => LossProcess::None,
            LossModel::Bernoulli { p } if Chance::new(p).is_never() => LossProcess::None,
            LossModel::Bernoulli { p } => LossProcess::Bernoulli(Chance::new(p)),
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => LossProcess::GilbertElliott {
                to_bad: Chance::new(p),
                to_good: Chance::new(r),
                loss_bad: Chance::new(one_minus_h),
                loss_good: Chance::new(one_minus_k),
                bad: false,
            },
        }
    }

    /// True if the model can never lose anything (lets the link skip drawing).
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, LossProcess::None)
    }

    /// Decides the fate of one segment: true = lost. The loss is drawn in the current
    /// state, then the state moves (netem's order), so a stay in the bad state of the
    /// simple Gilbert model loses a geometric number of segments with mean 1/r.
    pub(crate) fn lose(&mut self, rng: &mut Rng) -> bool {
        match self {
            LossProcess::None => false,
            LossProcess::Bernoulli(c) => rng.chance(*c),
            LossProcess::GilbertElliott {
                to_bad,
                to_good,
                loss_bad,
                loss_good,
                bad,
            } => {
                if *bad {
                    let lost = rng.chance(*loss_bad);
                    if rng.chance(*to_good) {
                        *bad = false;
                    }
                    lost
                } else {
                    let lost = rng.chance(*loss_good);
                    if rng.chance(*to_bad) {
                        *bad = true;
                    }
                    lost
                }
            }
        }
    }
}
