// Opens a `kiln report` page in Debian's chromium, headless, and prints on stdout one JSON
// object of what the page shows: the numbers of its elements (as a reader sees them, after
// its script ran), its embedded data, and every console error, page error and request that
// failed or left the page's own file. It asserts nothing: crates/kiln-cli/tests/report.rs
// compares the numbers with `kiln build --json`.
//
//   node check.mjs PAGE.html [--screenshot OUT.png]
//
// CHROMIUM overrides /usr/bin/chromium.

import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const page_path = args[0];
const shot_at = args.indexOf("--screenshot");
const screenshot = shot_at >= 0 ? args[shot_at + 1] : null;
if (!page_path) {
  console.error("usage: node check.mjs PAGE.html [--screenshot OUT.png]");
  process.exit(2);
}
const url = pathToFileURL(resolve(page_path)).href;

// A fresh profile per run: nothing cached or remembered from another run.
const profile = mkdtempSync(join(tmpdir(), "kiln-report-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1280, height: 900 },
});
const problems = { console_errors: [], page_errors: [], failed_requests: [], foreign_requests: [] };
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (m) => {
    if (m.type() === "error") problems.console_errors.push(m.text());
  });
  page.on("pageerror", (e) => problems.page_errors.push(String(e)));
  page.on("requestfailed", (r) =>
    problems.failed_requests.push(`${r.url()}: ${r.failure()?.errorText}`),
  );
  page.on("request", (r) => {
    // The page is self-contained: its own file is the only request it may make.
    if (r.url() !== url && !r.url().startsWith("data:")) problems.foreign_requests.push(r.url());
  });
  const response = await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#sum-variants");
  const shown = await page.evaluate(() => {
    const number = (el) => (el ? Number(el.dataset.value) : null);
    const text = (el) => (el ? el.textContent.trim() : null);
    const summary = {};
    for (const el of document.querySelectorAll("#summary .n")) {
      summary[el.id.replace(/^sum-/, "")] = { value: Number(el.dataset.value), text: text(el) };
    }
    const rows = (id, key) =>
      Array.from(document.querySelectorAll(`#${id} tbody tr`)).map((tr) => {
        const row = { name: tr.dataset[key] };
        for (const td of tr.querySelectorAll("td[data-k]")) row[td.dataset.k] = Number(td.dataset.value);
        return row;
      });
    return {
      title: document.title,
      summary,
      funnel: rows("funnel", "shader"),
      targets: rows("targets", "target"),
      outputs: Object.fromEntries(
        Array.from(document.querySelectorAll("#outputs tbody tr")).map((tr) => [
          tr.dataset.shader,
          Object.fromEntries(
            Array.from(tr.querySelectorAll("td[data-target]")).map((td) => [
              td.dataset.target,
              { bytes: Number(td.dataset.value), outputs: Number(td.dataset.outputs), failed: Number(td.dataset.failed) },
            ]),
          ),
        ]),
      ),
      compile_time: Array.from(document.querySelectorAll("#compile-time tbody tr")).map((tr) => ({
        shader: tr.dataset.shader,
        pass: tr.dataset.pass,
        compile_us: Number(tr.querySelector('[data-k="compile-us"]').dataset.value),
      })),
      dedup: {
        pairs: number(document.getElementById("dedup-pairs")),
        texts: number(document.getElementById("dedup-texts")),
        ratio: number(document.getElementById("dedup-ratio")),
      },
      failures: Array.from(document.querySelectorAll("#failures tbody tr")).map((tr) =>
        Array.from(tr.cells).map((c) => c.textContent),
      ),
      history_points: document.querySelectorAll("#history-chart circle.pt").length,
      history_count: number(document.getElementById("history-count")),
      data: JSON.parse(document.getElementById("kiln-data").textContent),
    };
  });
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ status: response ? response.status() : null, ...problems, shown }));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
