// Copies the pinned front-end assets from node_modules into web/static/vendor,
// where go:embed picks them up. The output is committed; CI reruns this script
// and fails if anything changed.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const out = "web/static/vendor";
const files = [
  ["htmx.org", "dist/htmx.min.js", "htmx.min.js"],
  ["htmx-ext-ws", "dist/ws.min.js", "htmx-ext-ws.min.js"],
  ["uplot", "dist/uPlot.iife.min.js", "uPlot.iife.min.js"],
  ["uplot", "dist/uPlot.min.css", "uPlot.min.css"],
];

mkdirSync(out, { recursive: true });
const versions = new Map();
for (const [pkg, from, to] of files) {
  const dir = join("node_modules", pkg);
  const { version } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  versions.set(pkg, version);
  copyFileSync(join(dir, from), join(out, to));
}
const lines = [...versions].map(([pkg, v]) => `${pkg} ${v}`).sort();
writeFileSync(join(out, "VERSIONS"), lines.join("\n") + "\n");
console.log(`vendored ${files.length} files into ${out}`);
