"""The architecture diagrams of lessons 09-12, drawn as SVG files in this folder.

    python notebooks/diagrams/draw.py           # write every diagram
    python notebooks/diagrams/draw.py --check   # exit 1 if a file differs from what this script draws

A lesson shows a diagram with a Markdown image, ``![what it shows](diagrams/11_gpt.svg)``: the path
is relative to notebooks/, so JupyterLab finds it, and the site's build (docs/site/build.py) copies
it along with the page. To change a label, change it here and run the script; tests/test_diagrams.py
fails while a file differs from what the script writes.

The rules every diagram keeps (the tests check the first four):

- Okabe-Ito's colour-blind-safe palette (``PALETTE``), on a white background so that the site's dark
  mode does not swallow black text; colour never tells two things apart on its own: a label, a
  dashed line or a pattern does too;
- text is SVG text in the generic ``sans-serif`` font, never outlines, at least 12 px;
- 680 px wide at most (the site's content column is 688 px), with a ``viewBox``, so that a narrower
  column scales the picture down instead of cutting it off;
- a ``<title>`` and a ``<desc>`` for screen readers;
- every name of a module, an argument or a function is the code's own (``norm1``, ``self_attn``,
  ``tok_emb``, ``n_kv_heads``, ...): text marked as code is checked against course_lib's source.

Labels are measured while drawing, with the metrics of DejaVu Sans (matplotlib ships it; it is also
Linux's usual sans-serif, and wider than Helvetica or Arial): a label wider than its box, text
outside the picture or two pieces of text on top of each other stop the script with a message.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent

# Okabe & Ito (2008), "Color Universal Design": eight colours that stay distinct for the common
# kinds of colour blindness. White is the background; tints are these colours with an opacity.
PALETTE = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",  # Okabe-Ito's "bluish green"
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",  # Okabe-Ito's "reddish purple"
}
WHITE = "#FFFFFF"

# One meaning per colour, in every diagram.
KINDS = {
    "attn": PALETTE["blue"],  # attention: self_attn, cross_attn
    "ff": PALETTE["green"],  # feed-forward networks: ff, linear1/linear2, w1/w3/w2
    "norm": PALETTE["orange"],  # LayerNorm, RMSNorm
    "emb": PALETTE["purple"],  # embeddings and the de-embedding
    "data": PALETTE["sky_blue"],  # tensors: the memory, keys and values, cached positions
    "mask": PALETTE["vermillion"],  # masks, and the new token in a cache
    "plain": PALETTE["black"],  # dropout, activations, anything else
}
TINT = 0.22  # fill opacity of a box: a light tint keeps black text readable
FONT = "sans-serif"
MIN_FONT = 12
MAX_WIDTH = 680


@lru_cache(maxsize=None)
def text_width(text: str, size: float, bold: bool = False, italic: bool = False) -> float:
    """The width of `text` in px, set in DejaVu Sans at `size` px (matplotlib's font metrics)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font = FontProperties(
        family="DejaVu Sans", size=size, weight="bold" if bold else "normal", style="italic" if italic else "normal"
    )
    width, _, _ = TextToPath().get_text_width_height_descent(text, font, ismath=False)
    return width


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


@dataclass
class Canvas:
    """One SVG picture, `width` x `height` px, drawn in px from its top-left corner."""

    name: str
    width: int
    height: int
    title: str
    desc: str
    parts: list[str] = field(default_factory=list)
    texts: list[tuple[float, float, float, float, str]] = field(default_factory=list)  # bounding boxes

    def __post_init__(self):
        if self.width > MAX_WIDTH:
            raise ValueError(f"{self.name}: {self.width} px is wider than {MAX_WIDTH} px")

    # --- shapes ---------------------------------------------------------------------------------------

    def rect(self, x, y, w, h, *, color=None, fill=None, dash=False, rx=4, stroke_width=1.4, opacity=TINT):
        """A box, white unless `color` strokes it and fills it with a tint of that colour (`fill`: a
        colour at full strength instead)."""
        stroke = color or PALETTE["black"]
        if fill is None and color:  # a tint over white: the box hides the lines behind it
            self.parts.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" rx="{rx}" fill="{WHITE}"/>'
            )
            paint = f'fill="{color}" fill-opacity="{opacity}"'
        else:
            paint = f'fill="{fill or WHITE}"'
        dashes = ' stroke-dasharray="5 3"' if dash else ""
        self.parts.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" rx="{rx}" {paint} '
            f'stroke="{stroke}" stroke-width="{stroke_width}"{dashes}/>'
        )

    def line(self, *points, arrow=True, dash=False, color=None, width=1.6):
        """A polyline through `points`, (x, y) each, with an arrowhead at the end."""
        d = " ".join(f"{_num(x)},{_num(y)}" for x, y in points)
        head = (' marker-end="url(#arrow-wide)"' if width >= 2.5 else ' marker-end="url(#arrow)"') if arrow else ""
        dashes = ' stroke-dasharray="6 4"' if dash else ""
        stroke = color or PALETTE["black"]
        self.parts.append(
            f'<polyline points="{d}" fill="none" stroke="{stroke}" stroke-width="{width}"{dashes}{head}/>'
        )

    def polygon(self, *points, color, opacity=TINT, stroke=True):
        d = " ".join(f"{_num(x)},{_num(y)}" for x, y in points)
        outline = f'stroke="{color}" stroke-width="1"' if stroke else 'stroke="none"'
        self.parts.append(f'<polygon points="{d}" fill="{color}" fill-opacity="{opacity}" {outline}/>')

    def dot(self, x, y, r=3.5):
        self.parts.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{r}" fill="{PALETTE["black"]}"/>')

    def plus(self, x, y, r=9, sign="+"):
        """The residual add (or another operation, `sign`) as a circled sign."""
        self.parts.append(
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{r}" fill="{WHITE}" stroke="{PALETTE["black"]}" '
            f'stroke-width="1.6"/>'
        )
        s = r * 0.55
        if sign == "+":
            self.parts.append(
                f'<path d="M{_num(x - s)},{_num(y)} H{_num(x + s)} M{_num(x)},{_num(y - s)} V{_num(y + s)}" '
                f'stroke="{PALETTE["black"]}" stroke-width="1.8"/>'
            )
        else:  # ×: element-wise product
            self.parts.append(
                f'<path d="M{_num(x - s)},{_num(y - s)} L{_num(x + s)},{_num(y + s)} M{_num(x - s)},{_num(y + s)} '
                f'L{_num(x + s)},{_num(y - s)}" stroke="{PALETTE["black"]}" stroke-width="1.8"/>'
            )

    def raw(self, svg: str):
        self.parts.append(svg)

    # --- text -----------------------------------------------------------------------------------------

    def text(
        self,
        x,
        y,
        s: str,
        *,
        size=13,
        anchor="middle",
        bold=False,
        italic=False,
        code=False,
        rotate=0,
        box=None,
        bg=False,
    ):
        """`s` centred vertically on y; `anchor` start/middle/end at x. `code`: the text is (made of) the
        code's names, which the tests look up in course_lib; in mixed text, mark the code `like this`.
        `box`: (x0, x1) it must fit between. `rotate`: -90 reads from bottom to top, 90 from top to
        bottom (centred on x, y). `bg`: a white background, for text over lines."""
        pieces = s.split("`")  # odd pieces are code
        if len(pieces) % 2 == 0:
            raise ValueError(f"{self.name}: unbalanced ` in {s!r}")
        s = "".join(pieces)
        if size < MIN_FONT:
            raise ValueError(f"{self.name}: {s!r} at {size} px is smaller than {MIN_FONT} px")
        w = text_width(s, size, bold, italic)
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        if box is not None and (x0 < box[0] - 0.5 or x0 + w > box[1] + 0.5):
            raise ValueError(
                f"{self.name}: {s!r} is {w:.0f} px wide and does not fit its box ({box[1] - box[0]:.0f} px)"
            )
        if rotate:  # centred on (x, y)
            bounds = (x - size * 0.5, y - w / 2, x + size * 0.5, y + w / 2)
        else:  # capitals and descenders: about half an em either side of the centre line
            bounds = (x0, y - size * 0.5, x0 + w, y + size * 0.5)
        if bounds[0] < 0 or bounds[2] > self.width or bounds[1] < 0 or bounds[3] > self.height:
            raise ValueError(f"{self.name}: {s!r} runs outside the picture (bounds {bounds})")
        for other in self.texts:
            if bounds[0] < other[2] and other[0] < bounds[2] and bounds[1] < other[3] and other[1] < bounds[3]:
                raise ValueError(f"{self.name}: {s!r} overlaps {other[4]!r}")
        self.texts.append((*bounds, s))
        attrs = [f'font-size="{_num(size)}"']
        if anchor != "start":
            attrs.append(f'text-anchor="{anchor}"')
        if bold:
            attrs.append('font-weight="bold"')
        if italic:
            attrs.append('font-style="italic"')
        if code:
            attrs.append('class="code"')
        baseline = size * 0.36  # DejaVu's capitals are 0.73 em high: half of that centres a line on y
        if rotate:
            attrs.append(f'transform="rotate({rotate} {_num(x)} {_num(y)})"')
        if bg:
            self.parts.append(
                f'<rect x="{_num(bounds[0] - 3)}" y="{_num(bounds[1] - 2)}" width="{_num(bounds[2] - bounds[0] + 6)}" '
                f'height="{_num(bounds[3] - bounds[1] + 4)}" fill="{WHITE}"/>'
            )
        content = "".join(
            f'<tspan class="code">{escape(piece)}</tspan>' if k % 2 else escape(piece)
            for k, piece in enumerate(pieces)
            if piece
        )
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y + baseline)}" {" ".join(attrs)}>{content}</text>')

    def box(
        self, x, y, w, h, label, *, kind="plain", sub=None, size=13, sub_size=12, dash=False, code=True, sub_code=None
    ):
        """A box of `kind`'s colour (dashed: used in training only, such as dropout) labelled `label`, with
        an optional second line `sub`. Both are the code's names unless code=False (or sub_code=False
        for the second line alone)."""
        color = KINDS[kind]
        self.rect(x, y, w, h, color=color if kind != "plain" else None, dash=dash)
        fit = (x + 4, x + w - 4)
        if sub is None:
            self.text(x + w / 2, y + h / 2, label, size=size, code=code, box=fit)
        else:
            gap = (size + sub_size) * 0.6
            top = y + h / 2 - gap / 2
            self.text(x + w / 2, top, label, size=size, code=code, box=fit)
            self.text(x + w / 2, top + gap, sub, size=sub_size, box=fit, code=code if sub_code is None else sub_code)

    def svg(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" role="img" aria-labelledby="title desc" '
            f'font-family="{FONT}" fill="{PALETTE["black"]}">'
        )
        defs = (
            "<defs>"
            '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
            'markerWidth="9" markerHeight="9" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{PALETTE["black"]}"/></marker>'
            '<marker id="arrow-wide" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
            'markerWidth="14" markerHeight="14" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{PALETTE["black"]}"/></marker>'
            '<pattern id="hatch" width="7" height="7" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)">'
            f'<line x1="0" y1="0" x2="0" y2="7" stroke="{PALETTE["vermillion"]}" stroke-width="1.6"/></pattern>'
            "</defs>"
        )
        body = "\n".join(self.parts)
        return (
            f'{head}\n<title id="title">{escape(self.title)}</title>\n<desc id="desc">{escape(self.desc)}</desc>\n'
            f"{defs}\n"
            f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="{WHITE}"/>\n'
            f"{body}\n</svg>\n"
        )


# --- pieces shared by several diagrams ---------------------------------------------------------------


def sublayer(c: Canvas, stream_x, col_x, y_split, boxes, *, gap=14):
    """One pre-norm sub-layer: from the stream at `y_split` into a column of `boxes`, drawn bottom to
    top, and back into a residual add on the stream above the last box. `boxes` are callables
    f(y_bottom) -> y_top that draw themselves above y_bottom, `gap` px apart. Returns the add's y."""
    c.dot(stream_x, y_split)
    y = y_split
    c.line((stream_x, y), (col_x, y), arrow=False)
    for draw in boxes:
        top = draw(y - gap)
        # a frame whose contents continue the line (`runs_on`) gets no arrowhead at its edge
        c.line((col_x, y), (col_x, y - gap), arrow=not getattr(draw, "runs_on", False))
        y = top
    y_merge = y - gap - 6
    towards = 9 if col_x > stream_x else -9
    c.line((col_x, y), (col_x, y_merge), (stream_x + towards, y_merge))
    c.plus(stream_x, y_merge)
    return y_merge


def boxed(c: Canvas, x_centre, w, h, label, **kw):
    """A callable for `sublayer`: a box of height h centred on x_centre, just above its argument."""

    def draw(y_bottom):
        c.box(x_centre - w / 2, y_bottom - h, w, h, label, **kw)
        return y_bottom - h

    return draw


def stack_shadow(c: Canvas, x, y, w, h, n=2, step=5):
    """Outlines behind a frame: a stack of identical blocks."""
    for k in range(n, 0, -1):
        c.rect(x + k * step, y - k * step, w, h, rx=6, stroke_width=1)


# --- lesson 09: the block -----------------------------------------------------------------------------


def block_09() -> Canvas:
    c = Canvas(
        "09_transformer_block",
        680,
        700,
        "The transformer block: pre-norm (EncoderBlock with norm_first=True) and post-norm",
        "Left, the pre-norm block. The residual stream x, shaped (B, T, d_model), runs from the bottom "
        "to the top through two additions only. The first sub-layer branches off, goes through norm1 "
        "(a LayerNorm), self_attn (MultiHeadAttention, with a mask), and dropout1, and is added back. "
        "The second goes through norm2, ff (a FeedForward: linear1 from d_model to d_ff, ReLU or GELU, "
        "linear2 back to d_model) and dropout2, and is added back. Right, the post-norm block of the "
        "2017 paper: the sub-layers read the stream directly and norm1 and norm2 sit on the stream after "
        "each addition. A DecoderBlock adds a third sub-layer, norm2 then cross_attn into the encoder's "
        "memory, between the two, and its feed-forward norm is norm3. The dropout boxes are dashed: they act only "
        "in training.",
    )
    bottom = 590  # where the stream enters
    # Left: pre-norm.
    c.text(210, 20, "`EncoderBlock`, pre-norm", size=15, bold=True)
    c.text(210, 40, "`norm_first=True`: GPT-2 and most models since", size=12, italic=True)
    sx, cx, w = 60, 235, 190  # the stream, the sub-layers' column, their boxes' width

    def attention(y_bottom):
        c.box(cx - w / 2, y_bottom - 52, w, 52, "self_attn", kind="attn", sub="MultiHeadAttention")
        c.line((cx + w / 2 + 36, y_bottom - 26), (cx + w / 2, y_bottom - 26))
        c.text(cx + w / 2 + 42, y_bottom - 26, "mask", size=12, anchor="start", code=True)
        return y_bottom - 52

    def feed_forward(y_bottom):
        top = y_bottom - 128
        c.rect(cx - w / 2, top, w, 128, color=KINDS["ff"], rx=6)
        c.text(cx, top + 14, "ff: FeedForward", size=13, code=True, box=(cx - w / 2, cx + w / 2))
        inner = w - 30
        c.box(cx - inner / 2, top + 98, inner, 24, "linear1: d_model → d_ff", size=12, kind="ff")
        c.line((cx, top + 98), (cx, top + 84))
        c.box(cx - inner / 2, top + 60, inner, 24, "ReLU or GELU", size=12, code=False)
        c.line((cx, top + 60), (cx, top + 48))
        c.box(cx - inner / 2, top + 24, inner, 24, "linear2: d_ff → d_model", size=12, kind="ff")
        return top

    first = sublayer(
        c,
        sx,
        cx,
        bottom - 22,
        [boxed(c, cx, w, 26, "norm1: LayerNorm", kind="norm"), attention, boxed(c, cx, w, 24, "dropout1", dash=True)],
    )
    second = sublayer(
        c,
        sx,
        cx,
        first - 30,
        [
            boxed(c, cx, w, 26, "norm2: LayerNorm", kind="norm"),
            feed_forward,
            boxed(c, cx, w, 24, "dropout2", dash=True),
        ],
    )
    c.line((sx, bottom), (sx, first + 9))
    c.line((sx, first - 9), (sx, second + 9))
    c.line((sx, second - 9), (sx, 72))
    c.text(sx, 62, "x", size=13, code=True)
    c.text(sx, bottom + 12, "x (B, T, d_model)", size=13, code=True)
    c.text(sx - 14, (bottom - 22 + first) / 2, "identity path", size=12, italic=True, rotate=-90)
    c.text(sx - 14, (first - 30 + second) / 2, "identity path", size=12, italic=True, rotate=-90)
    c.text(210, bottom + 36, "x = x + dropout(sublayer(norm(x)))", size=12)

    # Right: post-norm.
    c.raw(f'<line x1="428" y1="8" x2="428" y2="{bottom + 46}" stroke="{PALETTE["black"]}" stroke-dasharray="2 4"/>')
    c.text(555, 20, "post-norm", size=15, bold=True)
    c.text(555, 40, "`norm_first=False`: the 2017 paper", size=12, italic=True)
    px, pc, pw = 470, 590, 130  # the stream, the sub-layers' column, their boxes' width

    def post_sublayer(y_split, label, sub, kind, dropout, norm):
        """A sub-layer added back into the stream, then its norm on the stream; returns the norm's top."""
        c.dot(px, y_split)
        c.line((px, y_split), (pc, y_split), (pc, y_split - 14))
        c.box(pc - pw / 2, y_split - 66, pw, 52, label, kind=kind, sub=sub, sub_code=not sub.startswith("("))
        c.line((pc, y_split - 66), (pc, y_split - 80))
        c.box(pc - pw / 2, y_split - 104, pw, 24, dropout, dash=True)
        y_add = y_split - 124
        c.line((pc, y_split - 104), (pc, y_add), (px + 9, y_add))
        c.plus(px, y_add)
        c.line((px, y_split), (px, y_add + 9))  # the stream, past the split, into the add
        c.line((px, y_add - 9), (px, y_add - 30))
        c.box(px - 40, y_add - 56, 80, 26, norm, kind="norm")
        return y_add - 56

    c.line((px, bottom), (px, bottom - 22), arrow=False)
    top1 = post_sublayer(bottom - 22, "self_attn", "(and a mask)", "attn", "dropout1", "norm1")
    c.line((px, top1), (px, top1 - 40), arrow=False)
    top2 = post_sublayer(top1 - 40, "ff", "linear1, linear2", "ff", "dropout2", "norm2")
    c.line((px, top2), (px, 72))
    c.text(px, 62, "x", size=13, code=True)
    c.text(px, bottom + 12, "x", size=13, code=True)
    c.text(555, bottom + 36, "x = norm(x + dropout(sublayer(x)))", size=12)

    c.text(
        20,
        bottom + 64,
        "`DecoderBlock` (lesson 10) puts a third sub-layer between the two: `norm2`, then `cross_attn`",
        size=12,
        anchor="start",
    )
    c.text(
        20,
        bottom + 82,
        "into the encoder's memory; its feed-forward sub-layer then uses `norm3`.",
        size=12,
        anchor="start",
    )
    c.text(20, bottom + 100, "Dashed boxes act only in training (dropout).", size=12, anchor="start")
    return c


# --- lesson 10: the encoder-decoder ---------------------------------------------------------------------


def mask_grid(c: Canvas, x, y, allowed, cell=11):
    """A small boolean mask: a filled cell may attend (True), an empty one may not. `allowed` is a
    list of rows (queries) of 0/1 per key."""
    for i, row in enumerate(allowed):
        for j, ok in enumerate(row):
            if ok:
                c.rect(x + j * cell, y + i * cell, cell, cell, color=KINDS["mask"], rx=0, stroke_width=0.8, opacity=0.6)
            else:
                c.rect(x + j * cell, y + i * cell, cell, cell, rx=0, stroke_width=0.8)
    return x + len(allowed[0]) * cell, y + len(allowed) * cell


def encoder_decoder_10() -> Canvas:
    c = Canvas(
        "10_encoder_decoder",
        680,
        620,
        "The encoder-decoder (Seq2SeqTransformer) with cross-attention",
        "Left, the encoder: source ids src, shaped (B, S), go through src_emb times the square root of C "
        "plus the sinusoid table positions, then n_encoder_layers pre-norm EncoderBlocks (norm1, "
        "self_attn with the mask source_mask(src), norm2, ff, each added back to the stream), then "
        "encoder.norm. Its output is the memory, shaped (B, S, C), one vector per source token. Right, "
        "the decoder: tgt_in, shaped (B, T), through tgt_emb and positions, then n_decoder_layers "
        "DecoderBlocks: norm1 and causal self_attn with target_mask(tgt_in), norm2 and cross_attn, whose "
        "queries come from the decoder and whose keys and values are projections of the memory (masked "
        "by source_mask(src)), then norm3 and ff; then decoder.norm and lm_head give logits shaped "
        "(B, T, V_tgt). Every decoder block reads the same memory. Top left, the two masks as small grids: "
        "source_mask hides padded source keys; target_mask is causal and hides padded target keys.",
    )
    bottom = 598  # the ids' labels sit below this line
    # Encoder: stream on the left of its column. Decoder: mirrored, stream on the right, so that the
    # memory reaches cross_attn without crossing the decoder's stream.
    es, ec, ew = 24, 150, 200
    ds, dc, dw = 655, 505, 232
    c.text(ec, 18, "encoder", size=15, bold=True)
    c.text(dc, 18, "decoder", size=15, bold=True)

    def stack(stream, col, width, y_frame_bottom, title, subtitle, rows):
        """A frame (a stack of identical blocks) of pre-norm sub-layers; `rows` are (norm, module,
        mask line, kind). Returns the frame's top and the y of each module's middle."""
        mark = len(c.parts)  # the frame goes behind what is drawn inside it
        middles = []
        y = y_frame_bottom - 12
        c.line((stream, y_frame_bottom + 12), (stream, y - 1), arrow=False)
        for norm, module, sub, kind in rows:

            def module_box(y_bottom, module=module, sub=sub, kind=kind):
                h = 40 if sub else 26
                c.box(col - width / 2, y_bottom - h, width, h, module, kind=kind, sub=sub)
                middles.append(y_bottom - h / 2)
                return y_bottom - h

            y_add = sublayer(c, stream, col, y, [boxed(c, col, width, 20, norm, kind="norm"), module_box], gap=10)
            c.line((stream, y), (stream, y_add + 9), arrow=False)
            y = y_add - 9 - 10
        top = y - 34
        left = min(stream, col - width / 2) - 12
        right = max(stream, col + width / 2) + 12
        inside = c.parts[mark:]
        del c.parts[mark:]
        stack_shadow(c, left, top, right - left, y_frame_bottom - top)
        c.rect(left, top, right - left, y_frame_bottom - top, rx=6)
        c.parts += inside
        mid = (left + right) / 2
        c.text(mid, top + 12, title, size=13, bold=True, code=True, box=(left, right))
        c.text(mid, top + 28, subtitle, size=12, code=True, box=(left, right))
        return top, middles

    # Encoder.
    c.text(ec, bottom + 12, "src (B, S)", size=13, code=True)
    c.box(ec - ew / 2, bottom - 28, ew, 26, "src_emb · √C + positions", kind="emb")
    c.line((ec, bottom - 28), (ec, bottom - 40), (es, bottom - 40), (es, bottom - 52), arrow=False)
    enc_top, enc_mid = stack(
        es,
        ec,
        ew - 20,
        bottom - 52,
        "encoder.layers",
        "n_encoder_layers × EncoderBlock",
        [("norm1", "self_attn", "mask: source_mask(src)", "attn"), ("norm2", "ff", None, "ff")],
    )
    c.line((es, enc_top), (es, enc_top - 30), (ec, enc_top - 30), (ec, enc_top - 38))
    c.box(ec - ew / 2, enc_top - 64, ew, 26, "encoder.norm: LayerNorm", kind="norm")
    c.line((ec, enc_top - 64), (ec, enc_top - 78))
    c.box(ec - ew / 2, enc_top - 106, ew, 28, "memory (B, S, C)", kind="data")

    # Decoder.
    c.text(dc, bottom + 12, "`tgt_in (B, T)`: <bos> + target so far", size=13)
    c.box(dc - dw / 2, bottom - 28, dw, 26, "tgt_emb · √C + positions", kind="emb")
    c.line((dc, bottom - 28), (dc, bottom - 40), (ds, bottom - 40), (ds, bottom - 52), arrow=False)
    dec_top, dec_mid = stack(
        ds,
        dc,
        dw - 20,
        bottom - 52,
        "decoder.layers",
        "n_decoder_layers × DecoderBlock",
        [
            ("norm1", "self_attn", "mask: target_mask(tgt_in)", "attn"),
            ("norm2", "cross_attn", "memory_mask: source_mask(src)", "attn"),
            ("norm3", "ff", None, "ff"),
        ],
    )
    c.line((ds, dec_top), (ds, dec_top - 22), (dc, dec_top - 22), (dc, dec_top - 30))
    c.box(dc - dw / 2, dec_top - 56, dw, 26, "decoder.norm: LayerNorm", kind="norm")
    c.line((dc, dec_top - 56), (dc, dec_top - 70))
    c.box(dc - dw / 2, dec_top - 96, dw, 26, "lm_head: C → V_tgt", kind="emb")
    c.line((dc, dec_top - 96), (dc, dec_top - 112))
    c.text(dc, dec_top - 122, "logits (B, T, V_tgt)", size=13, code=True)

    # The memory into every decoder block's cross_attn.
    cross_y = dec_mid[1]
    mem_y = enc_top - 92
    x_turn = 270
    c.line((ec + ew / 2, mem_y), (x_turn, mem_y), (x_turn, cross_y), (dc - (dw - 20) / 2, cross_y), width=3)
    c.text(x_turn + 8, cross_y - 14, "keys, values", size=12, anchor="start")
    c.text(x_turn + 8, mem_y + 18, "one memory for", size=12, anchor="start", italic=True)
    c.text(x_turn + 8, mem_y + 34, "every block", size=12, anchor="start", italic=True)

    # The masks, as small grids (rows: queries, columns: keys), above the encoder.
    c.text(20, 42, "The masks (filled = True = may attend):", size=13, anchor="start", bold=True)
    source = [[1, 1, 1, 0, 0]] * 5  # 3 real source tokens, 2 <pad>
    target = [[int(j <= i and j < 4) for j in range(5)] for i in range(5)]  # causal; the last is <pad>
    for x0, grid, name, note in (
        (95, source, "source_mask(src)", "hides <pad> keys"),
        (265, target, "target_mask(tgt_in)", "causal, hides <pad> keys"),
    ):
        c.text(x0, 62, "keys →", size=12)
        mask_grid(c, x0 - 27.5, 72, grid)
        c.text(x0 - 38, 99.5, "queries", size=12, rotate=-90)
        c.text(x0, 142, name, size=12, code=True)
        c.text(x0, 158, note, size=12)
    return c


# --- lesson 11: the GPT ----------------------------------------------------------------------------------


def mini_block(c: Canvas, stream, col, width, y_bottom, rows, *, gap=10):
    """Pre-norm sub-layers in a compact column (the stream at x=stream): `rows` are (norm, module, sub,
    kind). Returns the y where the stream leaves the last add."""
    y = y_bottom
    for norm, module, sub, kind in rows:

        def module_box(y_b, module=module, sub=sub, kind=kind):
            h = 40 if sub else 26
            c.box(col - width / 2, y_b - h, width, h, module, kind=kind, sub=sub)
            return y_b - h

        y_add = sublayer(c, stream, col, y, [boxed(c, col, width, 20, norm, kind="norm"), module_box], gap=gap)
        c.line((stream, y), (stream, y_add + 9), arrow=False)
        y = y_add - 9 - gap
    return y


def gpt_11() -> Canvas:
    c = Canvas(
        "11_gpt",
        680,
        600,
        "The GPT (course_lib.models.GPT), with weight tying",
        "Token ids idx, shaped (B, T), are looked up in tok_emb, a (V, C) table; the positions 0 to T - 1 "
        "are looked up in pos_emb, a (block_size, C) table; the two are added (then drop, dropout) to give "
        "x, shaped (B, T, C). x goes through blocks: n_layer pre-norm EncoderBlocks with GELU, each with "
        "norm1 and self_attn under causal_mask(T), and norm2 and ff, each added back to the stream. Then "
        "ln_f, a final LayerNorm, and lm_head, a linear map from C to V without bias, give logits shaped "
        "(B, T, V): row t scores the token after position t. On the right, weight tying: with "
        "tie_weights=True, lm_head.weight is tok_emb.weight, one (V, C) matrix: the embedding reads a row "
        "of it, the de-embedding takes the dot product of the final vector with every row.",
    )
    cx, w = 230, 250  # the model's column
    c.text(cx, 20, "GPT", size=15, bold=True, code=True)
    bottom = 560
    # Embeddings.
    c.text(cx + 62, bottom + 22, "idx (B, T)", size=13, code=True)
    c.text(cx - 62, bottom + 22, "positions 0 … T-1", size=13)
    c.box(cx + 4, bottom - 30, 116, 26, "tok_emb", kind="emb")
    c.box(cx - 120, bottom - 30, 116, 26, "pos_emb", kind="emb")
    c.line((cx - 62, bottom + 12), (cx - 62, bottom - 4))
    c.line((cx + 62, bottom + 12), (cx + 62, bottom - 4))
    c.line((cx - 62, bottom - 30), (cx - 62, bottom - 50), (cx - 9, bottom - 50))
    c.line((cx + 62, bottom - 30), (cx + 62, bottom - 50), (cx + 9, bottom - 50))
    c.plus(cx, bottom - 50)
    c.line((cx, bottom - 59), (cx, bottom - 74))
    c.box(cx - 50, bottom - 98, 100, 24, "drop", dash=True)
    c.text(cx + 62, bottom - 86, "x (B, T, C)", size=12, anchor="start", code=True)
    # The blocks.
    frame_bottom = bottom - 116
    c.line((cx, bottom - 98), (cx, frame_bottom + 4), arrow=False)
    stream = cx - w / 2 + 16
    col = cx + 12
    mark = len(c.parts)
    c.line(
        (cx, frame_bottom + 4),
        (cx, frame_bottom - 4),
        (stream, frame_bottom - 4),
        (stream, frame_bottom - 12),
        arrow=False,
    )
    y = mini_block(
        c,
        stream,
        col,
        w - 70,
        frame_bottom - 12,
        [("norm1", "self_attn", "mask: causal_mask(T)", "attn"), ("norm2", "ff", "linear1, GELU, linear2", "ff")],
    )
    top = y - 34
    inside = c.parts[mark:]
    del c.parts[mark:]
    stack_shadow(c, cx - w / 2, top, w, frame_bottom - top)
    c.rect(cx - w / 2, top, w, frame_bottom - top, rx=6)
    c.parts += inside
    title_x = (stream + cx + w / 2) / 2 + 4  # right of the stream, which leaves through the top
    c.text(title_x, top + 12, "blocks", size=13, bold=True, code=True)
    c.text(title_x, top + 28, "`n_layer × EncoderBlock`, pre-norm", size=12)
    c.line((stream, y), (stream, top + 44), arrow=False)
    c.line((stream, top + 44), (stream, top - 6), (cx, top - 6), (cx, top - 22))
    # The head.
    c.box(cx - 80, top - 48, 160, 26, "ln_f: LayerNorm", kind="norm")
    c.line((cx, top - 48), (cx, top - 62))
    c.box(cx - 80, top - 88, 160, 26, "lm_head: C → V", kind="emb")
    c.line((cx, top - 88), (cx, top - 104))
    c.text(cx, top - 114, "logits (B, T, V)", size=13, code=True)

    # Weight tying: one (V, C) matrix, read by row in tok_emb, dotted with every row in lm_head.
    mx, my, mw, mh = 500, 250, 96, 150  # the matrix
    c.text(mx + mw / 2, my - 54, "tie_weights=True:", size=13, bold=True, code=True)
    c.text(mx + mw / 2, my - 36, "one (V, C) matrix", size=12)
    c.rect(mx, my - 22, mw, mh + 22, color=KINDS["emb"])
    c.text(mx + mw / 2, my - 11, "C →", size=12)
    rows = 10
    for k in range(1, rows):
        yk = my + k * mh / rows
        c.raw(
            f'<line x1="{mx}" y1="{_num(yk)}" x2="{mx + mw}" y2="{_num(yk)}" stroke="{KINDS["emb"]}" '
            f'stroke-width="0.8"/>'
        )
    c.rect(mx, my + 6 * mh / rows, mw, mh / rows, fill=KINDS["emb"], rx=0, stroke_width=1.4)
    c.text(mx - 8, my + mh / 2, "V rows", size=12, anchor="end")
    c.text(mx + mw / 2, my + mh + 16, "tok_emb.weight", size=12, code=True)
    c.text(mx + mw / 2, my + mh + 32, "is `lm_head.weight`", size=12)
    # to lm_head: the final vector against every row
    head_y = top - 75
    c.line((mx + mw / 2, my - 64), (mx + mw / 2, head_y), (cx + 80, head_y), dash=True)
    c.text(mx + mw / 2 - 8, head_y - 14, "score: h · every row", size=12, anchor="end")
    # to tok_emb: one row per token id
    emb_y = bottom - 17
    c.line((mx + mw / 2, my + mh + 42), (mx + mw / 2, emb_y), (cx + 120, emb_y), dash=True)
    c.text(mx + mw / 2 - 8, emb_y - 14, "look up row idx[b, t]", size=12, anchor="end")
    return c


# --- lesson 12: the modern block, grouped-query attention, the rolling cache, the tiles -------------------


def badge(c: Canvas, x, y, n: int):
    """A circled number that ties a changed part to the legend (colour is not the cue)."""
    c.raw(
        f'<circle cx="{_num(x)}" cy="{_num(y)}" r="9" fill="{PALETTE["yellow"]}" stroke="{PALETTE["black"]}" '
        f'stroke-width="1.2"/>'
    )
    c.text(x, y, str(n), size=12, bold=True)


def blocks_12() -> Canvas:
    c = Canvas(
        "12_gpt2_vs_modern_block",
        680,
        762,
        "Lesson 11's GPT-2 block beside lesson 12's modern block (ModernBlock)",
        "Two pre-norm blocks side by side, each with a residual stream and two sub-layers. Left, lesson "
        "11's block (EncoderBlock): norm1 is a LayerNorm; self_attn projects the input with w_q, w_k and "
        "w_v, with biases, computes softmax of q times k transposed over the square root of d, times v, "
        "and maps back with w_o; there are no positions inside, because pos_emb was added below the "
        "blocks; norm2 is a LayerNorm and ff is a FeedForward: linear1, GELU, linear2. Right, ModernBlock: "
        "1, norm1 and norm2 are RMSNorms; 2, ff is a SwiGLU: w1 through silu, times w3, then w2; 3, "
        "rotary positions are applied to q and k inside self_attn, after w_q and w_k, and there is no "
        "position table; 4, no linear map has a bias. Its w_k and w_v may have fewer heads, n_kv_heads, "
        "than w_q: grouped-query attention.",
    )
    bottom = 628

    def panel(stream, col, w, modern: bool):
        x0 = col - w / 2
        c.text(col - 20, 20, "ModernBlock" if modern else "EncoderBlock", size=15, bold=True, code=True)
        subtitle = "lesson 12: Llama's and Mistral's block" if modern else "lesson 11's GPT: GPT-2's block"
        c.text(col - 20, 40, subtitle, size=12, italic=True)
        third = (w - 40) / 3  # w_q, w_k, w_v side by side

        def attention(y_bottom):
            y_bottom -= 12  # the line from the norm below runs on into w_q, w_k and w_v
            top = y_bottom - 174
            c.rect(x0, top, w, 174 + 12, color=KINDS["attn"], rx=6, opacity=0.12)
            title = "self_attn (bias=False)" if modern else "self_attn (bias=True)"
            c.text(col, top + 13, title, size=13, code=True, box=(x0, x0 + w))
            heads = "w_k, w_v: n_kv_heads heads" if modern else "w_q, w_k, w_v: n_heads heads"
            c.text(col, top + 30, heads, size=12, code=True, box=(x0, x0 + w))
            # w_q, w_k, w_v
            names = ["w_q", "w_k", "w_v"]
            centres = [x0 + 10 + third / 2 + k * (third + 10) for k in range(3)]
            c.line((centres[0], y_bottom + 6), (centres[2], y_bottom + 6), arrow=False)
            c.line((col, y_bottom + 12), (col, y_bottom + 6), arrow=False)
            for name, xc in zip(names, centres):
                c.box(xc - third / 2, y_bottom - 32, third, 24, name, kind="attn", size=12)
                c.line((xc, y_bottom + 6), (xc, y_bottom - 8))
            if modern:
                # rotary on q and k only
                rq0, rq1 = centres[0] - third / 2, centres[1] + third / 2
                c.box(rq0, y_bottom - 66, rq1 - rq0, 24, "rotary: apply_rotary", kind="attn", size=12)
                for xc in centres[:2]:
                    c.line((xc, y_bottom - 32), (xc, y_bottom - 42))
                badge(c, rq1 + 16, y_bottom - 54, 3)
                c.line((centres[2], y_bottom - 32), (centres[2], y_bottom - 76))
                for xc in centres[:2]:
                    c.line((xc, y_bottom - 66), (xc, y_bottom - 76))
            else:
                for xc in centres:
                    c.line((xc, y_bottom - 32), (xc, y_bottom - 76))
                c.raw(
                    f'<rect x="{_num(x0 + 30)}" y="{_num(y_bottom - 68)}" width="{_num(w - 60)}" height="32" '
                    f'fill="{WHITE}"/>'
                )
                c.text(col, y_bottom - 60, "no positions in here:", size=12, italic=True)
                c.text(col, y_bottom - 44, "pos_emb is added below", size=12, italic=True)
            c.box(x0 + 10, y_bottom - 100, w - 20, 24, "softmax(q·kᵀ/√d)·v", size=12, kind="attn", code=False)
            c.line((col, y_bottom - 100), (col, y_bottom - 110))
            c.box(col - third / 2, y_bottom - 132, third, 22, "w_o", kind="attn", size=12)
            if modern:
                badge(c, x0 + w - 16, top + 13, 4)
            return top

        attention.runs_on = True  # `sublayer` draws no arrowhead at its edge

        def feed_forward(y_bottom):
            y_bottom -= 12  # the line from the norm below runs on into the first map(s)
            top = y_bottom - 142
            c.rect(x0, top, w, 142 + 12, color=KINDS["ff"], rx=6, opacity=0.12)
            c.text(col, top + 13, "ff: SwiGLU" if modern else "ff: FeedForward", size=13, code=True)
            if modern:
                left, right = col - w / 4 - 5, col + w / 4 + 5
                c.line((col, y_bottom + 12), (col, y_bottom + 6), arrow=False)
                c.line((left, y_bottom + 6), (right, y_bottom + 6), arrow=False)
                c.line((left, y_bottom + 6), (left, y_bottom - 10))
                c.line((right, y_bottom + 6), (right, y_bottom - 10))
                c.box(left - 45, y_bottom - 32, 90, 22, "w1", kind="ff", size=12)
                c.box(right - 45, y_bottom - 32, 90, 22, "w3", kind="ff", size=12)
                c.line((left, y_bottom - 32), (left, y_bottom - 42))
                c.box(left - 45, y_bottom - 62, 90, 20, "silu", size=12, code=True)
                c.line((left, y_bottom - 62), (left, y_bottom - 78), (col - 9, y_bottom - 78))
                c.line((right, y_bottom - 32), (right, y_bottom - 78), (col + 9, y_bottom - 78))
                c.plus(col, y_bottom - 78, sign="×")
                c.line((col, y_bottom - 87), (col, y_bottom - 96))
                c.box(col - 45, y_bottom - 118, 90, 22, "w2", kind="ff", size=12)
                badge(c, x0 + w - 16, top + 13, 2)
            else:
                for k, (name, kind) in enumerate((("linear1", "ff"), ("GELU", "plain"), ("linear2", "ff"))):
                    yb = y_bottom - 8 - k * 36
                    c.box(col - 60, yb - 24, 120, 24, name, kind=kind, size=12, code=name != "GELU")
                    if k < 2:
                        c.line((col, yb - 24), (col, yb - 36))
                c.line((col, y_bottom + 12), (col, y_bottom - 8))
            return top

        feed_forward.runs_on = True

        norm = "RMSNorm" if modern else "LayerNorm"

        def norm_box(name):
            def draw(y_bottom):
                c.box(x0 + 20, y_bottom - 26, w - 40, 26, f"{name}: {norm}", kind="norm")
                if modern:
                    badge(c, x0 + w - 4, y_bottom - 13, 1)
                return y_bottom - 26

            return draw

        first = sublayer(c, stream, col, bottom - 20, [norm_box("norm1"), attention])
        second = sublayer(c, stream, col, first - 26, [norm_box("norm2"), feed_forward])
        c.line((stream, bottom), (stream, first + 9))
        c.line((stream, first - 9), (stream, second + 9))
        c.line((stream, second - 9), (stream, second - 40))
        c.text(stream, second - 50, "x", size=13, code=True)
        c.text(stream, bottom + 12, "x", size=13, code=True)

    panel(22, 186, 250, modern=False)
    c.raw(f'<line x1="335" y1="8" x2="335" y2="{bottom + 20}" stroke="{PALETTE["black"]}" stroke-dasharray="2 4"/>')
    panel(358, 522, 250, modern=True)

    legend = [
        (1, "LayerNorm → RMSNorm: no centring, no bias"),
        (2, "FeedForward → SwiGLU: w2(silu(w1(x)) * w3(x)), d_ff ≈ 8/3 · d_model"),
        (3, "rotary positions turn q and k inside self_attn: no pos_emb table"),
        (4, "no biases in any nn.Linear (bias=False)"),
    ]
    for k, (n, line) in enumerate(legend):
        y = bottom + 44 + k * 24
        badge(c, 24, y, n)
        c.text(42, y, line, size=13, anchor="start")
    return c


def gqa_12() -> Canvas:
    c = Canvas(
        "12_grouped_query_attention",
        680,
        480,
        "Grouped-query attention: query heads sharing key/value heads",
        "Three rows, each with n_heads = 8 query heads numbered 0 to 7 above their key/value heads. "
        "Multi-head attention, n_kv_heads = 8: every query head has its own key/value head, and a KV "
        "cache stores 8 heads. Grouped-query attention, n_kv_heads = 2: query heads 0 to 3 share "
        "key/value head 0 and query heads 4 to 7 share key/value head 1, because query head h uses "
        "key/value head h // (n_heads // n_kv_heads) = h // 4; the cache stores 2 heads, 4 times less. "
        "Multi-query attention, n_kv_heads = 1: all 8 query heads share one key/value head; the cache "
        "stores 1 head. w_k and w_v map d_model to n_kv_heads times head_dim, and repeat_kv_heads "
        "repeats each key/value head for the query heads of its group.",
    )
    c.text(340, 18, "query head h uses key/value head `h // (n_heads // n_kv_heads)`", size=14, bold=True)
    n_heads = 8
    qx0, qw, qgap = 172, 44, 8  # query heads: x of the first, width, gap
    colours = [PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["purple"]]
    rows = [
        (8, "multi-head", "8 heads"),
        (2, "grouped-query", "2 heads: 4× smaller"),
        (1, "multi-query", "1 head: 8× smaller"),
    ]
    for r, (n_kv, name, cache) in enumerate(rows):
        top = 44 + r * 134
        group = n_heads // n_kv
        c.text(16, top + 18, f"n_kv_heads = {n_kv}", size=14, bold=True, anchor="start", code=True)
        c.text(16, top + 38, name, size=13, anchor="start")
        c.text(16, top + 58, "`KVCache` stores", size=12, anchor="start")
        c.text(16, top + 74, cache, size=12, anchor="start")
        if r:
            c.raw(
                f'<line x1="10" y1="{top - 10}" x2="670" y2="{top - 10}" stroke="{PALETTE["black"]}" '
                f'stroke-dasharray="2 4"/>'
            )
        centres = [qx0 + qw / 2 + h * (qw + qgap) for h in range(n_heads)]
        for h, xc in enumerate(centres):
            g = h // group
            colour = colours[g % len(colours)] if n_kv < n_heads else PALETTE["blue"]
            c.rect(xc - qw / 2, top + 6, qw, 26, color=colour)
            c.text(xc, top + 19, f"q {h}", size=12)
        for g in range(n_kv):
            members = centres[g * group : (g + 1) * group]
            kx = sum(members) / len(members)
            kw = max(qw, (members[-1] - members[0]) * 0.6 + qw) if n_kv < n_heads else qw
            colour = colours[g % len(colours)] if n_kv < n_heads else PALETTE["sky_blue"]
            for xc in members:
                c.line((xc, top + 32), (xc, top + 48), (kx, top + 72), arrow=False, color=PALETTE["black"], width=1.2)
            c.rect(kx - kw / 2, top + 72, kw, 28, color=colour, stroke_width=2)
            c.text(kx, top + 86, f"k, v {g}", size=12, bold=n_kv < n_heads)
            if 1 < group:
                c.text(kx, top + 110, f"group {g}: q {g * group} … {(g + 1) * group - 1}", size=12, italic=True)
        if r == 1:
            c.text(centres[-1] + qw / 2 + 10, top + 11, "query", size=12, anchor="start")
            c.text(centres[-1] + qw / 2 + 10, top + 27, "heads", size=12, anchor="start")
            c.text(centres[-1] + qw / 2 + 10, top + 78, "key/value", size=12, anchor="start")
            c.text(centres[-1] + qw / 2 + 10, top + 94, "heads", size=12, anchor="start")
    c.text(
        340,
        452,
        "w_k, w_v: d_model → n_kv_heads · head_dim; repeat_kv_heads(k, n_heads // n_kv_heads)",
        size=12,
        code=True,
    )
    c.text(340, 468, "gives every query head its group's keys and values", size=12)
    return c


def brace(c: Canvas, x0, x1, y, label, *, below=True, size=12, code=False):
    """A square bracket from x0 to x1 at y with a label beside it (below or above)."""
    tick = 5 if below else -5
    c.line((x0, y - tick), (x0, y), (x1, y), (x1, y - tick), arrow=False, width=1.2)
    c.text((x0 + x1) / 2, y + (11 if below else -11), label, size=size, code=code)


def rolling_cache_12() -> Canvas:
    c = Canvas(
        "12_rolling_kv_cache",
        680,
        444,
        "The rolling KV cache of a sliding window, without and with attention sinks",
        "Positions 0 to 15 of a generation with ModernGPTConfig(window=8), while the token at position "
        "15 is generated: its query attends to the cached keys and values and to its own, 8 positions in "
        "all. Top row, a rolling KVCache with max_len = 7: it keeps positions 8 to 14; positions 0 to 7 "
        "were evicted, the oldest first. Bottom row, KVCache with max_len = 7 and sinks = 2: positions 0 "
        "and 1 are attention sinks and are never evicted; the cache keeps them and the last 5 positions, "
        "10 to 14; positions 2 to 9 were evicted. A model trained with full attention leans on its first "
        "tokens, so keeping them as sinks lets it run past its window (StreamingLLM). Evicted cells are "
        "white with a dashed outline; sinks have a thick outline; the new token is "
        "drawn with a thick outline and a bold number.",
    )
    cw, step, x0 = 32, 36, 46  # cell width, distance between cells, first cell's left edge
    n = 16

    def cell(k, y, state):
        x = x0 + k * step
        if state == "evicted":
            c.rect(x, y, cw, cw, dash=True, rx=3, stroke_width=1.2)
        elif state == "cached":
            c.rect(x, y, cw, cw, color=KINDS["data"], rx=3, opacity=0.45)
        elif state == "sink":
            c.rect(x, y, cw, cw, color=PALETTE["purple"], rx=3, stroke_width=3, opacity=0.45)
        else:  # the new token
            c.rect(x, y, cw, cw, color=KINDS["mask"], rx=3, stroke_width=3, opacity=0.35)
        c.text(x + cw / 2, y + cw / 2, str(k), size=12, bold=state == "new")

    def centre(k):
        return x0 + k * step + cw / 2

    def span(a, b):  # the outer edges of cells a … b
        return x0 + a * step, x0 + b * step + cw

    c.text(
        16, 20, "`ModernGPTConfig(window=8)`, generating the token at position 15", size=14, anchor="start", bold=True
    )

    # Without sinks.
    y1 = 70
    c.text(
        16, y1 - 22, "`KVCache(max_len=7)`: the last 7 keys and values; the oldest are evicted", size=13, anchor="start"
    )
    for k in range(n):
        cell(k, y1, "evicted" if k < 8 else "cached" if k < 15 else "new")
    brace(c, *span(0, 7), y1 + cw + 8, "evicted, oldest first")
    brace(c, *span(8, 14), y1 + cw + 8, "cached: `max_len` = 7")
    brace(c, *span(8, 15), y1 + cw + 40, "what position 15 attends to: `window` = 8")

    # With sinks.
    y2 = 232
    c.text(
        16, y2 - 40, "`KVCache(max_len=7, sinks=2)`: the first 2 positions are never evicted,", size=13, anchor="start"
    )
    c.text(16, y2 - 22, "then the last `max_len - sinks` = 5", size=13, anchor="start")
    for k in range(n):
        cell(k, y2, "sink" if k < 2 else "evicted" if k < 10 else "cached" if k < 15 else "new")
    brace(c, *span(0, 1), y2 + cw + 8, "`sinks`")
    brace(c, *span(2, 9), y2 + cw + 8, "evicted, oldest first")
    brace(c, *span(10, 14), y2 + cw + 8, "the last 5")
    c.text(centre(15), y2 + cw + 19, "new", size=12)
    c.text(16, y2 + 84, "Position 15 attends to 0, 1 and 10 … 15: still 8 positions.", size=12, anchor="start")

    c.text(
        16,
        y2 + 108,
        "A model trained with full attention puts spare attention on its first tokens:",
        size=12,
        anchor="start",
    )
    c.text(
        16,
        y2 + 124,
        "evict them and it degrades; keep them as sinks and it runs on (StreamingLLM).",
        size=12,
        anchor="start",
    )

    # Legend.
    y3 = 390
    for k, (state, label) in enumerate(
        (
            ("cached", "in the cache"),
            ("sink", "a sink, kept for ever"),
            ("evicted", "evicted"),
            ("new", "the new token"),
        )
    ):
        x = 16 + k * 166
        cell_x = x
        if state == "evicted":
            c.rect(cell_x, y3, 24, 24, dash=True, rx=3, stroke_width=1.2)
        elif state == "cached":
            c.rect(cell_x, y3, 24, 24, color=KINDS["data"], rx=3, opacity=0.45)
        elif state == "sink":
            c.rect(cell_x, y3, 24, 24, color=PALETTE["purple"], rx=3, stroke_width=3, opacity=0.45)
        else:
            c.rect(cell_x, y3, 24, 24, color=KINDS["mask"], rx=3, stroke_width=3, opacity=0.35)
        c.text(cell_x + 32, y3 + 12, label, size=12, anchor="start")
    c.text(16, y3 + 42, "`model.new_kv_cache(sinks=2)` gives every block such a cache.", size=12, anchor="start")
    return c


def tiles_12() -> Canvas:
    c = Canvas(
        "12_tiled_attention",
        680,
        452,
        "Tiled attention under the causal mask: which tiles are computed and which are skipped",
        "A 6 by 6 grid of tiles: rows are query blocks of query_block_size queries, columns are key "
        "blocks of block_size keys, with T_q = T_k. Tiles below the diagonal are computed in full: every "
        "key in them is in the past of every query. The 6 tiles on the diagonal are computed and then "
        "the causal mask sets their upper triangle, the future, to minus infinity (hatched). The 15 tiles "
        "above the diagonal are wholly in the future and skipped: the loop over key blocks breaks there. "
        "Each query block walks its key blocks from left to right, carrying the online softmax's running "
        "maximum m, sum l and accumulator acc. With causal=True 21 of the 36 tiles are computed; with n "
        "blocks a side, n(n + 1) / 2 of n squared, about half at long sequences.",
    )
    n, t, gx, gy = 6, 48, 76, 96  # blocks a side, tile size, the grid's top-left corner
    blue = KINDS["attn"]

    def tile(x, y, kind, size=t):
        if kind == "full":
            c.rect(x, y, size, size, color=blue, rx=0, opacity=0.35)
        elif kind == "skip":
            c.rect(x, y, size, size, dash=True, rx=0, stroke_width=1.2)
        else:  # on the diagonal: the past computed, the future masked
            c.rect(x, y, size, size, rx=0)
            c.polygon((x, y), (x, y + size), (x + size, y + size), color=blue, opacity=0.35, stroke=False)
            c.raw(f'<polygon points="{x},{y} {x + size},{y} {x + size},{y + size}" fill="url(#hatch)" stroke="none"/>')
            c.raw(
                f'<rect x="{x}" y="{y}" width="{size}" height="{size}" fill="none" stroke="{PALETTE["black"]}" '
                f'stroke-width="1.4"/>'
            )

    c.text(16, 20, "tiled_attention(q, k, v, causal=True)", size=14, bold=True, anchor="start", code=True)
    c.text(gx + n * t / 2, 50, "key blocks: `block_size` keys each →", size=12)
    for kb in range(n):
        c.text(gx + kb * t + t / 2, 74, str(kb), size=12)
    c.text(30, gy + n * t / 2, "query blocks: `query_block_size` queries each →", size=12, rotate=90)
    for qb in range(n):
        c.text(gx - 14, gy + qb * t + t / 2, str(qb), size=12)
        for kb in range(n):
            kind = "full" if kb < qb else "diag" if kb == qb else "skip"
            tile(gx + kb * t, gy + qb * t, kind)
    # One query block's walk along its key blocks.
    row = 3
    y = gy + row * t + t / 2
    c.line((gx + 6, y), (gx + (row + 1) * t - 8, y), width=2.4)
    c.text(gx + (row + 1) * t + 6, y - 8, "break:", size=12, anchor="start", bold=True, bg=True)
    c.text(gx + (row + 1) * t + 6, y + 8, "the rest is future", size=12, anchor="start", bg=True)
    c.text(gx + n * t / 2, gy + n * t + 18, "each query block walks left to right, carrying m, l, acc", size=12)
    c.text(gx + n * t / 2, gy + n * t + 34, "(the online softmax's running max, sum and output)", size=12)

    # Legend and counts.
    lx = 404
    legend = [
        ("full", ["computed: every key", "is in the queries' past"]),
        ("diag", ["on the diagonal: computed,", "then the causal mask sets", "the future to −inf"]),
        ("skip", ["skipped: wholly in the", "future, never computed"]),
    ]
    y = 96
    for kind, lines in legend:
        tile(lx, y, kind, size=34)
        for k, line in enumerate(lines):
            c.text(lx + 46, y + 8 + k * 16, line, size=12, anchor="start")
        y += 34 + max(0, len(lines) - 2) * 16 + 22
    c.text(lx, y + 10, "tiles computed", size=13, bold=True, anchor="start")
    c.text(lx, y + 30, "`causal=False`: all 36", size=12, anchor="start")
    c.text(lx, y + 48, "`causal=True`: 21 (6 · 7 / 2)", size=12, anchor="start")
    c.text(lx, y + 72, "n blocks a side: n(n + 1) / 2 of n²,", size=12, anchor="start")
    c.text(lx, y + 88, "about half the work at long T", size=12, anchor="start")
    return c


DIAGRAMS = [block_09, encoder_decoder_10, gpt_11, blocks_12, gqa_12, rolling_cache_12, tiles_12]


def render_all() -> dict[str, str]:
    """Every diagram's file name and SVG text."""
    return {f"{c.name}.svg": c.svg() for c in (make() for make in DIAGRAMS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the files are up to date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = HERE / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python notebooks/diagrams/draw.py", file=sys.stderr)
        return 1
    print(("out of date: " if args.check else "written: ") + (", ".join(stale) or "nothing (all up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
