//! SVG to PNG for `longhaul plot -o FILE.png`, with the `resvg` renderer. Text uses the
//! system's fonts (a sans-serif such as DejaVu Sans); without any font installed the
//! picture renders without its labels.

use anyhow::Context as _;
use resvg::{tiny_skia, usvg};

/// Renders an SVG document to PNG bytes at its own size.
pub fn svg_to_png(svg: &str) -> anyhow::Result<Vec<u8>> {
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // The charts ask for the generic "sans-serif", which fontdb maps to Arial; use a sans
    // family this machine has instead.
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    let preferred = [
        "Arial",
        "DejaVu Sans",
        "Liberation Sans",
        "Noto Sans",
        "FreeSans",
    ];
    if let Some(family) = preferred
        .iter()
        .find(|p| families.iter().any(|f| f == *p))
        .map(|p| p.to_string())
        .or_else(|| families.first().cloned())
    {
        db.set_sans_serif_family(family);
    }
    let tree = usvg::Tree::from_str(svg, &opt).context("parsing the chart SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .with_context(|| format!("allocating a {}x{} picture", size.width(), size.height()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().context("encoding the PNG")
}
