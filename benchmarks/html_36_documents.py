"""The HTML page of docs/html_36_documents_*.png: Veri-Gran dev record 96, the one record with 36 passages,
its gold answer explained on the default model (sentence spans, one output unit per answer sentence).

    python benchmarks/html_36_documents.py runs/h36.html            # the page as rcattr draws it
    python benchmarks/html_36_documents.py runs/h36-pinned.html --pin 1   # the same, answer sentence 2 pinned

``--pin U`` appends a script that clicks output unit ``U`` on load. The screenshots were taken with Debian's
Chromium (``apt-get install chromium``), then cropped to x 170-1110 and quantised to 256 colours:

    chromium --headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars \\
      --run-all-compositor-stages-before-draw --virtual-time-budget=2000 --window-size=1280,2400 \\
      --user-data-dir=$(mktemp -d) --screenshot=runs/h36.png file://$PWD/runs/h36.html

The "before" screenshot is the same command on the commit before issue 48's change (292ca55).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="the HTML file to write")
    parser.add_argument("--pin", type=int, default=None, help="output unit to pin on load (0-based)")
    args = parser.parse_args()

    from rcattr import ContextInput, RCAttributor, load_model
    from rcattr.eval.common.datasets import load_verigran
    from rcattr.viz import save_html

    record = load_verigran()[96]
    result = RCAttributor(*load_model()).attribute(
        ContextInput(record.chunks, record.question),
        target=record.answer,
        granularity="sentence",
        output_granularity="sentence",
    )
    path = save_html(
        result, args.out, title="Should super PACs be abolished? (Veri-Gran dev 96, 36 documents)"
    )
    if args.pin is not None:
        page = path.read_text(encoding="utf-8")
        click = f"<script>document.querySelector('.u[data-u=\"{args.pin}\"]').click();</script></body>"
        path.write_text(page.replace("</body>", click), encoding="utf-8")
    print(path)


if __name__ == "__main__":
    main()
