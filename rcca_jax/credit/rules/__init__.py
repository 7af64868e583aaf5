"""Localization rules, one module per kind of evidence; `credit.localize` composes them."""
