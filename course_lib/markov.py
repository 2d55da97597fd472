"""Sequence models by counting: Markov chains of any order (lesson 02) and the second-order
model with skips, whose word-pair votes are the seed of attention (lesson 03)."""
from __future__ import annotations


# --- Markov chains (lesson 02) -------------------------------------------------------------------


# --- Second order with skips: voting features (lesson 03) -----------------------------------------
