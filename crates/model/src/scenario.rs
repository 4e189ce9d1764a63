//! The Land Speed Record runs `longhaul demo` re-enacts on an emulated path: for each, the
//! route's cities, the real round-trip time and MTU, and the record's own figures (rate,
//! distance, bit-meters/second), cross-checked against the shipped history.
//!
//! What is assumed where the history is silent:
//! - `caltech2003`: the history gives rate (2.38 Gbit/s) and distance (10,037 km); the RTT
//!   Geneva-Sunnyvale is taken as 180 ms (the record teams' own figure for CERN-Caltech
//!   paths, as in DOMAIN.md) and the MTU as 9000 (the teams ran jumbo frames, as in the
//!   Nov 2002 record of the same group).
//! - `tokyo2006`: the history gives 9.08 Gbit/s over 30,000 km (IPv6) and 500 ms RTT; the
//!   MTU is taken as 1500 (standard frames, as in the team's 2005 IPv6 record).
//! - Routes: the cities a reader recognises; their great-circle legs need not add up to the
//!   distance the contest counted (the real router hops are not in our data), so the
//!   metric of a scenario always uses [`Scenario::distance_km`], the record's figure.

use std::time::Duration;

use crate::lsr::history::{history, IpVersion, LsrRecord};
use crate::lsr::{bit_meters_per_second, TERABIT_METER};

/// One record run to re-enact.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name on the command line (`sunet2004`).
    pub name: &'static str,
    /// One line for people.
    pub title: &'static str,
    /// Cities of the path, as `longhaul record --route` takes them.
    pub route: &'static str,
    /// The distance the contest counted, km.
    pub distance_km: f64,
    /// Round-trip time of the real path.
    pub rtt: Duration,
    /// MTU of the real path, bytes.
    pub mtu: u32,
    /// The record's throughput, bit/s.
    pub record_rate_bps: f64,
    /// The record's metric, bit-meters/second.
    pub record_bit_meters_per_second: f64,
    /// IP version of the record.
    pub ip: IpVersion,
    /// Date of the record in the history (`2004-09-12`).
    pub record_date: &'static str,
    /// Where the figures come from and what was assumed.
    pub source: &'static str,
}

impl Scenario {
    /// Bit-meters/second of `rate_bps` over this scenario's distance.
    pub fn bit_meters_per_second(&self, rate_bps: f64) -> f64 {
        bit_meters_per_second(rate_bps, self.distance_km * 1000.0)
    }

    /// The record's row in the shipped history.
    pub fn record(&self) -> Option<&'static LsrRecord> {
        history()
            .iter()
            .find(|r| r.date.to_string() == self.record_date && r.ip == self.ip)
    }

    /// Bandwidth-delay product of `rate_bps` at this scenario's RTT, bytes.
    pub fn bdp_bytes(&self, rate_bps: u64) -> u64 {
        crate::buffers::bdp_bytes(rate_bps, self.rtt)
    }
}

/// Every scenario; the first is the default.
pub fn scenarios() -> &'static [Scenario] {
    &SCENARIOS
}

/// The scenario called `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// Names of every scenario, for messages.
pub fn names() -> Vec<&'static str> {
    SCENARIOS.iter().map(|s| s.name).collect()
}

static SCENARIOS: [Scenario; 3] = [
    Scenario {
        name: "sunet2004",
        title: "SUNET and Sprint, 2004: San Jose to Lulea over production networks, one stream",
        route: "SJC,SEA,CHI,NYC,AMS,STO,LLA",
        distance_km: 28_983.0,
        rtt: Duration::from_millis(436),
        mtu: 4470,
        record_rate_bps: 4_310.62e6,
        record_bit_meters_per_second: 124_935.0 * TERABIT_METER,
        ip: IpVersion::V4,
        record_date: "2004-09-12",
        source: "history: 1,966,080,000,000 bytes in 3,648.81 s over 28,983 km, MTU 4470, 436 ms RTT",
    },
    Scenario {
        name: "caltech2003",
        title: "Caltech and CERN, 2003: Geneva to Chicago to Sunnyvale, about 1 TB in an hour",
        route: "GVA,ORD,SJC",
        distance_km: 10_037.0,
        rtt: Duration::from_millis(180),
        mtu: 9000,
        record_rate_bps: 2.38e9,
        record_bit_meters_per_second: 23_888.0 * TERABIT_METER,
        ip: IpVersion::V4,
        record_date: "2003-02-27",
        source: "history: 2.38 Gbit/s over 10,037 km; 180 ms RTT and MTU 9000 assumed",
    },
    Scenario {
        name: "tokyo2006",
        title: "University of Tokyo and partners, 2006: the contest's last record, IPv6, 500 ms",
        route: "TYO,SEA,CHI,AMS,TYO",
        distance_km: 30_000.0,
        rtt: Duration::from_millis(500),
        mtu: 1500,
        record_rate_bps: 9.08e9,
        record_bit_meters_per_second: 272_400.0 * TERABIT_METER,
        ip: IpVersion::V6,
        record_date: "2006-12-31",
        source: "history: 9.08 Gbit/s over 30,000 km, IPv6, 500 ms RTT, hardware pacing; MTU 1500 assumed",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::Route;

    #[test]
    fn every_scenario_matches_its_row_in_the_history() {
        for s in scenarios() {
            let r = s
                .record()
                .unwrap_or_else(|| panic!("{}: no row {}", s.name, s.record_date));
            assert_eq!(r.distance_km, Some(s.distance_km), "{}", s.name);
            let gbit = r.gbit_per_second.expect("rate");
            assert!(
                (gbit * 1e9 - s.record_rate_bps).abs() / s.record_rate_bps < 1e-3,
                "{}: {gbit} Gbit/s in the history",
                s.name
            );
            assert_eq!(
                r.terabit_meters_per_second,
                s.record_bit_meters_per_second / TERABIT_METER,
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn rate_times_distance_gives_the_record_metric() {
        for s in scenarios() {
            let bmps = s.bit_meters_per_second(s.record_rate_bps);
            let err =
                (bmps - s.record_bit_meters_per_second).abs() / s.record_bit_meters_per_second;
            assert!(
                err < 2e-3,
                "{}: {bmps} vs {}",
                s.name,
                s.record_bit_meters_per_second
            );
        }
    }

    #[test]
    fn routes_parse_and_names_are_found() {
        for s in scenarios() {
            let route = Route::parse(s.route).expect(s.route);
            assert!(route.stops().len() >= 2);
            assert_eq!(find(&s.name.to_uppercase()), Some(s));
        }
        assert_eq!(scenarios()[0].name, "sunet2004");
        assert_eq!(find("nope"), None);
        assert_eq!(names(), ["sunet2004", "caltech2003", "tokyo2006"]);
    }

    #[test]
    fn caltech_route_is_close_to_the_quoted_distance() {
        let s = find("caltech2003").unwrap();
        let km = Route::parse(s.route).unwrap().distance_km();
        assert!((km - s.distance_km).abs() / s.distance_km < 0.01, "{km}");
    }

    #[test]
    fn sunet_figures() {
        let s = find("sunet2004").unwrap();
        assert_eq!(s.rtt, Duration::from_millis(436));
        assert_eq!(s.mtu, 4470);
        // 1 Gbit/s x 436 ms = 54.5 MB in flight.
        assert_eq!(s.bdp_bytes(1_000_000_000), 54_500_000);
        // 1 Gbit/s over 28,983 km = 28.983 Pb·m/s.
        assert!((s.bit_meters_per_second(1e9) - 28.983e15).abs() < 1e6);
        let tokyo = find("tokyo2006").unwrap();
        assert_eq!(tokyo.ip, IpVersion::V6);
        assert_eq!(tokyo.rtt, Duration::from_millis(500));
    }
}
