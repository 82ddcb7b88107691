//! `kiln report`: one self-contained HTML page (inline CSS, SVG and script, nothing fetched)
//! from the build history the library records in the store directory. Every number shown
//! has a stable `id` or `data-*` attribute, and the page embeds its data as JSON
//! (`<script type="application/json" id="kiln-data">`), so that a test can read both.

use crate::build::StoreArgs;
use kiln::pipeline::history::{read_history, BuildRecord, ShaderRecord};
use kiln::pipeline::PassTexts;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes: 0 the page was written (its path is printed on stdout); 2 the project, its
/// history or the page's file could not be read or written, or no build is recorded.
#[derive(clap::Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Where to write the page (default: `report.html` in the store directory).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: &ReportArgs) -> ExitCode {
    let mut project = match args.store.open() {
        Ok(project) => project,
        Err(code) => return code,
    };
    let history = match read_history(project.cache_dir()) {
        Ok(history) => history,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for warning in &history.warnings {
        say!("warning: {warning}");
    }
    if history.records.is_empty() {
        say!(
            "error: no build is recorded in {}: run `kiln build` first",
            project.cache_dir().display()
        );
        return ExitCode::from(2);
    }
    let texts = project.distinct_texts();
    let manifest = project.manifest().path.display().to_string();
    let html = page(&manifest, &history.records, &texts);
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| project.cache_dir().join("report.html"));
    let written = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => std::fs::create_dir_all(parent),
        None => Ok(()),
    }
    .and_then(|()| std::fs::write(&path, html));
    if let Err(e) = written {
        say!("error: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    crate::render::stdout_line(&path.display().to_string());
    ExitCode::SUCCESS
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Days to a civil date (proleptic Gregorian), eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Escapes text for HTML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON inside a `<script>` element: `</script>` and `<!--` in a string must not end it.
fn script_json(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The axes' product: the variants the axes alone make.
fn axes_product(shader: &ShaderRecord) -> u128 {
    // Saturating: the manifest caps the product, but a record is a file anyone can edit.
    shader
        .axes
        .iter()
        .fold(1u128, |n, axis| n.saturating_mul(axis.len().max(1) as u128))
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / f64::from(1 << 10)),
        n => format!("{n} B"),
    }
}

/// The page.
fn page(manifest: &str, records: &[BuildRecord], texts: &[PassTexts]) -> String {
    let Some(last) = records.last() else {
        return String::new();
    };
    let history: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            serde_json::json!({
                "time_ms": r.time_ms,
                "elapsed_ms": r.elapsed_ms,
                "counts": r.counts,
            })
        })
        .collect();
    let data = serde_json::json!({
        "manifest": manifest,
        "last": last,
        "history": history,
        "texts": texts,
    });
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>kiln report</title><style>{STYLE}</style></head><body>\n\
         <header><h1>kiln report</h1><p class=\"sub\"><span id=\"manifest\">{}</span> · last build \
         <time id=\"built-at\" data-ms=\"{}\">{}</time> · <span id=\"elapsed\" data-value=\"{:.3}\">{:.1} ms</span></p>\
         <div id=\"summary\" class=\"cards\"></div></header>\n<main>\n",
        esc(manifest),
        last.time_ms,
        utc(last.time_ms),
        last.elapsed_ms,
        last.elapsed_ms,
    );
    funnel(&mut html, last, texts);
    compile_times(&mut html, last);
    outputs(&mut html, last, texts);
    failures(&mut html, last);
    history_chart(&mut html, records);
    let _ = write!(
        html,
        "</main>\n<script type=\"application/json\" id=\"kiln-data\">{}</script>\n<script>{SCRIPT}</script>\n</body></html>\n",
        script_json(&data)
    );
    html
}

/// Per shader: the axes' product -> declared variants -> distinct texts -> compiled / from
/// cache / failed; its axes ranked by how much they multiply.
fn funnel(html: &mut String, last: &BuildRecord, texts: &[PassTexts]) {
    html.push_str(
        "<section><h2>Variant funnel</h2><p class=\"note\">Per shader: the product of its axes, \
         the keyword sets declared, the (variant, pass) pairs, their distinct preprocessed texts \
         (counted in the sources now), and what the last build did with them.</p>\
         <table id=\"funnel\" class=\"sortable\"><thead><tr><th>shader</th><th>axes product</th>\
         <th>declared</th><th>× passes</th><th>distinct texts</th><th>compiled</th>\
         <th>deduplicated</th><th>from cache</th><th>failed</th><th>funnel</th><th>axes, by factor</th>\
         </tr></thead><tbody>\n",
    );
    for shader in &last.shaders {
        // The history is a file on disk: an edited record's counts must not overflow.
        let pairs = shader.variants.saturating_mul(shader.passes.len());
        let of_shader = texts.iter().filter(|t| t.shader == shader.name);
        let distinct: usize = of_shader.map(|t| t.distinct).sum();
        let sum = |f: fn(&kiln::pipeline::history::PassCounts) -> usize| -> usize {
            shader
                .passes
                .iter()
                .map(|p| f(&p.counts))
                .fold(0, usize::saturating_add)
        };
        let (compiled, dedup, cached, failed) = (
            sum(|c| c.compiled),
            sum(|c| c.deduplicated),
            sum(|c| c.cached),
            sum(|c| c.failed),
        );
        let product = axes_product(shader);
        let mut axes: Vec<&Vec<String>> = shader.axes.iter().collect();
        axes.sort_by_key(|axis| std::cmp::Reverse(axis.len()));
        let ranked: Vec<String> = axes
            .iter()
            .map(|axis| {
                format!(
                    "<span class=\"axis\" data-factor=\"{}\">×{} {}</span>",
                    axis.len(),
                    axis.len(),
                    esc(&axis.join(" | "))
                )
            })
            .collect();
        let _ = writeln!(
            html,
            "<tr data-shader=\"{name}\"><th scope=\"row\">{name}</th>{}{}{}{}{}{}{}{}<td>{}</td><td class=\"axes\">{}</td></tr>",
            cell("product", product),
            cell("declared", shader.variants),
            cell("pairs", pairs),
            cell("texts", distinct),
            cell("compiled", compiled),
            cell("deduplicated", dedup),
            cell("cached", cached),
            cell("failed", failed),
            funnel_bars(&[
                product as f64 * shader.passes.len() as f64,
                pairs as f64,
                distinct as f64,
                compiled as f64,
            ]),
            ranked.join(" "),
            name = esc(&shader.name),
        );
    }
    html.push_str("</tbody></table></section>\n");
}

fn cell(key: &str, value: impl std::fmt::Display) -> String {
    format!("<td class=\"num\" data-k=\"{key}\" data-value=\"{value}\">{value}</td>")
}

/// Bars for a funnel's stages (axes' product and declared variants, both times the passes;
/// distinct texts; compiled), each as wide as its share of the widest.
fn funnel_bars(stages: &[f64]) -> String {
    let width = 160.0;
    let widest = stages.iter().copied().fold(0.0_f64, f64::max);
    let mut svg = format!(
        "<svg class=\"bars\" width=\"{width}\" height=\"{}\" role=\"img\">",
        8 * stages.len()
    );
    for (row, value) in stages.iter().enumerate() {
        let w = if widest > 0.0 {
            (value / widest * width).clamp(1.0, width)
        } else {
            1.0
        };
        let _ = write!(
            svg,
            "<rect x=\"0\" y=\"{}\" width=\"{w:.1}\" height=\"6\" class=\"s{row}\"/>",
            row * 8
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Compile time per shader and pass in the last build, slowest first.
fn compile_times(html: &mut String, last: &BuildRecord) {
    let mut rows: Vec<(&str, &str, &kiln::pipeline::history::PassCounts)> = last
        .shaders
        .iter()
        .flat_map(|s| {
            s.passes
                .iter()
                .map(move |p| (&*s.name, &*p.name, &p.counts))
        })
        .collect();
    rows.sort_by_key(|(_, _, c)| std::cmp::Reverse(c.compile_us));
    let total = rows
        .iter()
        .map(|(_, _, c)| c.compile_us)
        .fold(0, u64::saturating_add);
    let _ = writeln!(
        html,
        "<section><h2>Compile time</h2><p class=\"note\">Per shader and pass in the last build, \
         slowest first: <span id=\"compile-total\" data-us=\"{total}\">{} ms</span> in all \
         (cached variants cost none).</p><table id=\"compile-time\" class=\"sortable\"><thead><tr>\
         <th>shader</th><th>pass</th><th>compiled</th><th>time (ms)</th><th></th></tr></thead><tbody>",
        ms(total)
    );
    let slowest = rows.first().map_or(0, |(_, _, c)| c.compile_us).max(1);
    for (shader, pass, counts) in rows {
        let w = counts.compile_us as f64 / slowest as f64 * 160.0;
        let _ = writeln!(
            html,
            "<tr data-shader=\"{}\" data-pass=\"{}\"><td>{}</td><td>{}</td>{}<td class=\"num\" data-k=\"compile-us\" data-value=\"{}\">{}</td>\
             <td><svg class=\"bars\" width=\"160\" height=\"8\"><rect x=\"0\" y=\"1\" height=\"6\" width=\"{w:.1}\" class=\"s3\"/></svg></td></tr>",
            esc(shader),
            esc(pass),
            esc(shader),
            esc(pass),
            cell("compiled", counts.compiled),
            counts.compile_us,
            ms(counts.compile_us)
        );
    }
    html.push_str("</tbody></table></section>\n");
}

/// Output sizes per target, and the deduplication ratio.
fn outputs(html: &mut String, last: &BuildRecord, texts: &[PassTexts]) {
    let pairs: usize = texts.iter().map(|t| t.variants).sum();
    let distinct: usize = texts.iter().map(|t| t.distinct).sum();
    let ratio = if distinct > 0 {
        pairs as f64 / distinct as f64
    } else {
        0.0
    };
    let _ = writeln!(
        html,
        "<section><h2>Outputs</h2><p class=\"note\">Deduplication: <span id=\"dedup-pairs\" data-value=\"{pairs}\">{pairs}</span> \
         (variant, pass) pairs, <span id=\"dedup-texts\" data-value=\"{distinct}\">{distinct}</span> distinct texts: \
         ratio <strong id=\"dedup-ratio\" data-value=\"{ratio:.4}\">{ratio:.2}</strong>.</p>\
         <table id=\"targets\" class=\"sortable\"><thead><tr><th>target</th><th>outputs</th><th>bytes</th>\
         <th>size</th><th>failed</th></tr></thead><tbody>"
    );
    for target in &last.targets {
        let of_target = last
            .shaders
            .iter()
            .flat_map(|s| s.outputs.iter())
            .filter(|o| o.target == target.name);
        let (mut count, mut total, mut failed) = (0usize, 0u64, 0usize);
        for o in of_target {
            count = count.saturating_add(o.outputs);
            total = total.saturating_add(o.bytes);
            failed = failed.saturating_add(o.failed);
        }
        let _ = writeln!(
            html,
            "<tr data-target=\"{name}\"><th scope=\"row\">{name}</th>{}{}<td>{}</td>{}</tr>",
            cell("outputs", count),
            cell("bytes", total),
            bytes(total),
            cell("failed", failed),
            name = esc(&target.name),
        );
    }
    html.push_str(
        "</tbody></table>\n<table id=\"outputs\" class=\"sortable\"><thead><tr><th>shader</th>",
    );
    for target in &last.targets {
        let _ = write!(html, "<th>{}</th>", esc(&target.name));
    }
    html.push_str("</tr></thead><tbody>\n");
    for shader in &last.shaders {
        let _ = write!(
            html,
            "<tr data-shader=\"{0}\"><th scope=\"row\">{0}</th>",
            esc(&shader.name)
        );
        for o in &shader.outputs {
            let _ = write!(
                html,
                "<td class=\"num\" data-target=\"{}\" data-value=\"{}\" data-outputs=\"{}\" data-failed=\"{}\">{}{}</td>",
                esc(&o.target),
                o.bytes,
                o.outputs,
                o.failed,
                bytes(o.bytes),
                if o.failed > 0 {
                    format!(" <span class=\"bad\">({} failed)</span>", o.failed)
                } else {
                    String::new()
                }
            );
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></section>\n");
}

/// Every failed (variant, target) pair with its file and line.
fn failures(html: &mut String, last: &BuildRecord) {
    let _ = writeln!(
        html,
        "<section><h2>Failures</h2><p class=\"note\"><span id=\"failure-count\" data-value=\"{0}\">{0}</span> failed (variant, target) pair(s).</p>\
         <table id=\"failures\"><thead><tr><th>file</th><th>line</th><th>variant</th><th>target</th><th>error</th></tr></thead><tbody>",
        last.failures.len()
    );
    for f in &last.failures {
        let keywords = if f.keywords.is_empty() {
            "_".to_owned()
        } else {
            f.keywords.join("+")
        };
        let _ = writeln!(
            html,
            "<tr class=\"failure\"><td class=\"file\">{}</td><td class=\"num\">{}</td><td class=\"variant\">{}/{}/{}</td><td>{}</td><td class=\"msg\">{}</td></tr>",
            esc(f.file.as_deref().unwrap_or("")),
            f.line.map(|l| l.to_string()).unwrap_or_default(),
            esc(&f.shader),
            esc(&f.pass),
            esc(&keywords),
            esc(&f.target),
            esc(&f.message)
        );
    }
    html.push_str("</tbody></table></section>\n");
}

/// Build time (a line) and variants compiled (bars) of each recorded build.
fn history_chart(html: &mut String, records: &[BuildRecord]) {
    let (width, height, pad) = (760.0, 220.0, 44.0);
    let n = records.len().max(1) as f64;
    let max_ms = records
        .iter()
        .map(|r| r.elapsed_ms)
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let max_compiled = records
        .iter()
        .map(|r| r.counts.compiled)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let step = (width - 2.0 * pad) / n;
    let y_of = |fraction: f64| height - pad - fraction * (height - 2.0 * pad);
    let _ = write!(
        html,
        "<section><h2>History</h2><p class=\"note\"><span id=\"history-count\" data-value=\"{}\">{}</span> recorded build(s): \
         <span class=\"key s0\">■</span> variants compiled, <span class=\"key line\">●</span> build time.</p>\
         <svg id=\"history-chart\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\">\
         <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>\
         <text x=\"4\" y=\"{}\" class=\"lbl\">{max_ms:.0} ms</text><text x=\"{}\" y=\"{}\" class=\"lbl\">{max_compiled:.0}</text>",
        records.len(),
        records.len(),
        height - pad,
        width - pad,
        height - pad,
        pad - 6.0,
        width - pad + 4.0,
        pad - 6.0,
    );
    let mut line = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let x = pad + step * (i as f64 + 0.5);
        let bar = r.counts.compiled as f64 / max_compiled * (height - 2.0 * pad);
        let y = y_of(r.elapsed_ms / max_ms);
        line.push(format!("{x:.1},{y:.1}"));
        let _ = write!(
            html,
            "<rect class=\"s0 bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bar:.1}\" data-build=\"{i}\" data-compiled=\"{}\"><title>{}: {} compiled</title></rect>",
            x - step * 0.3,
            height - pad - bar,
            step * 0.6,
            r.counts.compiled,
            utc(r.time_ms),
            r.counts.compiled
        );
    }
    let _ = write!(
        html,
        "<polyline class=\"line\" fill=\"none\" points=\"{}\"/>",
        line.join(" ")
    );
    for (i, r) in records.iter().enumerate() {
        let x = pad + step * (i as f64 + 0.5);
        let _ = write!(
            html,
            "<circle class=\"pt\" cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\" data-build=\"{i}\" data-elapsed-ms=\"{:.3}\" data-compiled=\"{}\"><title>{}: {:.1} ms, {} compiled, {} from cache, {} failed</title></circle>",
            y_of(r.elapsed_ms / max_ms),
            r.elapsed_ms,
            r.counts.compiled,
            utc(r.time_ms),
            r.elapsed_ms,
            r.counts.compiled,
            r.counts.cached,
            r.counts.failed
        );
    }
    html.push_str("</svg><div id=\"history-tip\" class=\"tip\" hidden></div></section>\n");
}

const STYLE: &str = r#"
:root{--bg:#fbfaf7;--fg:#1d1d1f;--mute:#6b6b70;--line:#e4e1da;--a:#c8553d;--b:#2d6a8f;--c:#7aa95c;--d:#e0a43a}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg)}
header{padding:20px 28px 8px;border-bottom:1px solid var(--line);background:#fff}
h1{margin:0;font-size:22px}h2{font-size:16px;margin:0 0 6px}.sub,.note{color:var(--mute);margin:4px 0 10px}
main{padding:12px 28px 40px;display:grid;gap:18px}section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 16px;overflow-x:auto}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.card{border:1px solid var(--line);border-radius:8px;padding:8px 12px;min-width:104px;background:var(--bg)}
.card .n{display:block;font-size:20px;font-weight:600}.card .l{color:var(--mute);font-size:12px}.card.bad .n,span.bad{color:var(--a)}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
thead th{font-weight:600;color:var(--mute);font-size:12px;cursor:pointer;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.msg,td.axes{white-space:normal;font-family:ui-monospace,monospace;font-size:12px}.axis{display:inline-block;margin-right:6px;padding:0 5px;border-radius:4px;background:#f1eee8;font-size:12px}
.bars rect.s0{fill:var(--b)}.bars rect.s1{fill:#6f9fbd}.bars rect.s2{fill:var(--c)}.bars rect.s3{fill:var(--d)}
#history-chart .bar{fill:#9cc3dc}#history-chart .line{stroke:var(--a);stroke-width:2}#history-chart .pt{fill:var(--a)}#history-chart .axis{stroke:var(--mute)}
#history-chart .lbl{font-size:11px;fill:var(--mute)}.key.s0{color:#9cc3dc}.key.line{color:var(--a)}
.tip{position:fixed;background:#1d1d1f;color:#fff;padding:4px 8px;border-radius:4px;font-size:12px;pointer-events:none}
"#;

/// The page's only script: the summary cards from the embedded data, sortable tables, and
/// the chart's tooltip. It fetches nothing.
const SCRIPT: &str = r##"
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kiln-data").textContent);
  var counts = data.last.counts;
  var labels = [["variants", "variants"], ["compiled", "compiled"], ["cached", "from cache"],
    ["deduplicated", "deduplicated"], ["failed", "failed"], ["failed_outputs", "failed outputs"],
    ["outputs_written", "outputs written"], ["outputs_removed", "outputs removed"]];
  var summary = document.getElementById("summary");
  labels.forEach(function (pair) {
    var card = document.createElement("div");
    card.className = "card" + ((pair[0].indexOf("failed") === 0 && counts[pair[0]] > 0) ? " bad" : "");
    var n = document.createElement("span");
    n.className = "n";
    n.id = "sum-" + pair[0];
    n.dataset.value = String(counts[pair[0]]);
    n.textContent = counts[pair[0]].toLocaleString("en-US");
    var l = document.createElement("span");
    l.className = "l";
    l.textContent = pair[1];
    card.appendChild(n);
    card.appendChild(l);
    summary.appendChild(card);
  });
  var built = document.getElementById("built-at");
  built.title = new Date(Number(built.dataset.ms)).toString();

  function key(cell) {
    var v = cell.dataset.value;
    return v !== undefined && v !== "" && !isNaN(Number(v)) ? Number(v) : cell.textContent;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, column) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var down = th.dataset.sort !== "desc";
        th.dataset.sort = down ? "desc" : "asc";
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[column]), y = key(b.cells[column]);
          var order = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
          return down ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });

  var tip = document.getElementById("history-tip");
  document.querySelectorAll("#history-chart .pt").forEach(function (pt) {
    var build = data.history[Number(pt.dataset.build)];
    pt.addEventListener("mouseenter", function (e) {
      tip.textContent = new Date(build.time_ms).toISOString() + ": " + build.elapsed_ms.toFixed(1) +
        " ms, " + build.counts.compiled + " compiled";
      tip.style.left = (e.clientX + 12) + "px";
      tip.style.top = (e.clientY + 12) + "px";
      tip.hidden = false;
    });
    pt.addEventListener("mouseleave", function () { tip.hidden = true; });
  });
})();
"##;

#[cfg(test)]
mod tests {
    #[test]
    fn utc_spells_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc(1_798_761_599_000), "2026-12-31 23:59:59 UTC");
    }

    #[test]
    fn data_cannot_close_its_script_element() {
        let text = super::script_json(&serde_json::json!({"m": "</script><!--"}));
        assert!(!text.contains("</script"), "{text}");
        assert!(!text.contains("<!--"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["m"], "</script><!--");
    }
}
