//! Great-circle distances on a spherical Earth, as the Land Speed Record contest measured
//! them: the sum of great-circle legs between the cities where the path has router hops.
//!
//! The Earth is taken as a sphere of the IUGG mean radius R1 = 6371.0088 km and distances use
//! the haversine formula, which stays accurate for short legs and for nearly antipodal ones.
//! A spherical Earth differs from the WGS-84 ellipsoid by up to about 0.5 % on a long leg;
//! the contest's distances were quoted to about that precision.

/// Mean radius of the Earth (IUGG R1 = (2a + b) / 3 of WGS-84), in kilometres.
pub const EARTH_MEAN_RADIUS_KM: f64 = 6371.0088;

/// A point on the Earth's surface in decimal degrees (north and east positive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoPoint {
    /// Latitude in degrees, -90..=90.
    pub lat_deg: f64,
    /// Longitude in degrees, -180..=180.
    pub lon_deg: f64,
}

impl GeoPoint {
    /// A point from latitude and longitude in degrees, or `None` when either is out of range
    /// or not a finite number.
    pub fn new(lat_deg: f64, lon_deg: f64) -> Option<Self> {
        let ok = lat_deg.is_finite()
            && lon_deg.is_finite()
            && (-90.0..=90.0).contains(&lat_deg)
            && (-180.0..=180.0).contains(&lon_deg);
        ok.then_some(Self { lat_deg, lon_deg })
    }
}

/// Central angle between two points in radians (haversine formula).
pub fn central_angle_rad(a: GeoPoint, b: GeoPoint) -> f64 {
    let (phi1, phi2) = (a.lat_deg.to_radians(), b.lat_deg.to_radians());
    let dphi = phi2 - phi1;
    let dlambda = (b.lon_deg - a.lon_deg).to_radians();
    let h = (dphi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (dlambda / 2.0).sin().powi(2);
    // Rounding can push h a hair above 1 for antipodal points.
    2.0 * h.sqrt().min(1.0).asin()
}

/// Great-circle distance in kilometres on a sphere of [`EARTH_MEAN_RADIUS_KM`].
pub fn great_circle_km(a: GeoPoint, b: GeoPoint) -> f64 {
    central_angle_rad(a, b) * EARTH_MEAN_RADIUS_KM
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(lat: f64, lon: f64) -> GeoPoint {
        GeoPoint::new(lat, lon).expect("valid test point")
    }

    #[test]
    fn aviation_formulary_lax_jfk_worked_example() {
        // Ed Williams' Aviation Formulary: LAX (33d57'N 118d24'W) to JFK (40d38'N 73d47'W)
        // is 0.623585 radians = 2144 nm.
        let lax = p(33.0 + 57.0 / 60.0, -(118.0 + 24.0 / 60.0));
        let jfk = p(40.0 + 38.0 / 60.0, -(73.0 + 47.0 / 60.0));
        let angle = central_angle_rad(lax, jfk);
        assert!((angle - 0.623585).abs() < 1e-6, "angle {angle}");
        let nm = angle.to_degrees() * 60.0;
        assert!((nm - 2144.0).abs() < 0.5, "{nm} nm");
    }

    #[test]
    fn rosetta_code_bna_lax_worked_example() {
        // Rosetta Code's haversine task: BNA (36.12, -86.67) to LAX (33.94, -118.40) on a
        // sphere of 6372.8 km is 2887.2599506071106 km.
        let angle = central_angle_rad(p(36.12, -86.67), p(33.94, -118.40));
        assert!((angle * 6372.8 - 2_887.259_950_607_11).abs() < 1e-6);
    }

    #[test]
    fn quarter_and_half_circumference() {
        let quarter = great_circle_km(p(0.0, 0.0), p(0.0, 90.0));
        assert!((quarter - std::f64::consts::FRAC_PI_2 * EARTH_MEAN_RADIUS_KM).abs() < 1e-6);
        let pole = great_circle_km(p(0.0, 17.0), p(90.0, -120.0));
        assert!((pole - quarter).abs() < 1e-6);
        let antipode = great_circle_km(p(46.2381, 6.10895), p(-46.2381, 6.10895 - 180.0));
        assert!((antipode - std::f64::consts::PI * EARTH_MEAN_RADIUS_KM).abs() < 1e-3);
    }

    #[test]
    fn symmetric_and_zero_on_same_point() {
        let (a, b) = (p(65.5438, 22.122), p(37.362995, -121.928621));
        assert_eq!(great_circle_km(a, b), great_circle_km(b, a));
        assert_eq!(great_circle_km(a, a), 0.0);
    }

    proptest::proptest! {
        #[test]
        fn distances_are_a_metric_on_the_sphere(
            a in (-90.0f64..=90.0, -180.0f64..=180.0),
            b in (-90.0f64..=90.0, -180.0f64..=180.0),
            c in (-90.0f64..=90.0, -180.0f64..=180.0),
        ) {
            let (a, b, c) = (p(a.0, a.1), p(b.0, b.1), p(c.0, c.1));
            let ab = great_circle_km(a, b);
            let bc = great_circle_km(b, c);
            let ac = great_circle_km(a, c);
            let half_circumference = std::f64::consts::PI * EARTH_MEAN_RADIUS_KM;
            proptest::prop_assert!((0.0..=half_circumference + 1e-6).contains(&ab));
            proptest::prop_assert!((ab - great_circle_km(b, a)).abs() < 1e-9);
            // Triangle inequality, with room for rounding.
            proptest::prop_assert!(ac <= ab + bc + 1e-6, "{ac} > {ab} + {bc}");
        }
    }

    #[test]
    fn rejects_out_of_range_points() {
        assert!(GeoPoint::new(90.1, 0.0).is_none());
        assert!(GeoPoint::new(0.0, -180.5).is_none());
        assert!(GeoPoint::new(f64::NAN, 0.0).is_none());
    }
}
