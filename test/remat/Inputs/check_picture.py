"""Reads a --report picture (SVG) and the manifest of the same compile: the
panels' titles, whether the bars are the arena buffers (as compiled plus the
no-remat plan's), whether the marked peaks are the manifest's, and whether
the tooltips name the bindings."""
import json
import sys
import xml.dom.minidom

svg = xml.dom.minidom.parse(sys.argv[1])
with open(sys.argv[2]) as f:
    functions = json.load(f)["functions"]
texts = [t.firstChild.data for t in svg.getElementsByTagName("text") if t.firstChild]
panels = [t.split(" (")[0].split(":")[0] for t in texts if t.startswith("@")]
print("panels", sorted(set(panels)))
bars = [r for r in svg.getElementsByTagName("rect") if r.getAttribute("class") == "buffer"]
arena = sum(len(fn["arena"]) for fn in functions if fn["peak_bytes"] > 0)
# The no-remat panel draws that plan's buffers too: at least the compiled ones, more than them.
print("bars match the arena:", len(bars) > arena and sum(1 for t in texts if t.startswith("peak ")) == len(panels))
peaks = {int(t.split()[1]) for t in texts if t.startswith("peak ")}
want = {fn["peak_bytes"] for fn in functions if fn["peak_bytes"] > 0} | {
    fn["peak_bytes_no_remat"] for fn in functions if fn["peak_bytes_no_remat"] != fn["peak_bytes"]}
print("peaks match the manifest:", peaks == want)
titles = [b.getElementsByTagName("title")[0].firstChild.data for b in bars]
print("tooltips name bindings:", all("(%" in t or "(-)" in t for t in titles) and any("(%h" in t for t in titles))
