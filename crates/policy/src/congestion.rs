//! Which congestion control a sender runs: the user's `-C` if the kernel has it, else BBR
//! when available (it finds the bottleneck without filling the queue), else the kernel's
//! default.

use crate::PolicyError;

/// The congestion control a sender should use when the user named none: BBR when the
/// kernel has it (it finds the bottleneck without filling the queue), else the default.
pub fn default_congestion(available: &[String], default: &str) -> String {
    if available.iter().any(|c| c == "bbr") {
        "bbr".into()
    } else {
        default.into()
    }
}

/// Checks that `cc` can run here; the error lists what can and how to add it.
pub fn check_congestion(cc: &str, available: &[String]) -> Result<(), PolicyError> {
    if available.iter().any(|c| c == cc) {
        return Ok(());
    }
    Err(PolicyError::UnknownCongestion {
        name: cc.to_string(),
        available: available.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bbr_is_preferred_when_loaded() {
        assert_eq!(
            default_congestion(&kernel(&["reno", "cubic", "bbr"]), "cubic"),
            "bbr"
        );
        assert_eq!(
            default_congestion(&kernel(&["reno", "cubic"]), "cubic"),
            "cubic"
        );
    }

    #[test]
    fn an_unknown_name_is_refused_with_what_is_available() {
        let avail = kernel(&["reno", "cubic"]);
        assert!(check_congestion("cubic", &avail).is_ok());
        let e = check_congestion("vegas", &avail).unwrap_err();
        assert_eq!(
            e.to_string(),
            "congestion control \"vegas\" is not available on this host (available: reno cubic); load it with `modprobe tcp_vegas` or pick one of those"
        );
    }
}
