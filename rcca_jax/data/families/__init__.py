"""Registry of the parameterised mini-app task families.

`FAMILIES[name].generate(rng, index)` draws one task (request, executable rubrics and a
reference app that passes them) from `rng`; the `*_copy` families draw for a split
(`generate(rng, index, split)`, families/copying.py).
"""

from __future__ import annotations

from rcca_jax.data.families import copying, forms, games, lists, tools, widgets
from rcca_jax.data.families.base import Draft, Family, Rule

_SPECS = (
    ("counter", "Tools", "easy", widgets.counter),
    ("tabs", "Tools", "easy", widgets.tabs),
    ("modal", "Tools", "easy", widgets.modal),
    ("accordion", "Humanities", "easy", widgets.accordion),
    ("dark_mode", "Lifestyle", "easy", widgets.dark_mode),
    ("star_rating", "Lifestyle", "medium", widgets.star_rating),
    ("progress_steps", "Tools", "medium", widgets.progress_steps),
    ("form_validation", "Tools", "medium", forms.form_validation),
    ("char_counter", "Tools", "easy", forms.char_counter),
    ("password_strength", "Tools", "medium", forms.password_strength),
    ("tip_splitter", "Lifestyle", "medium", forms.tip_splitter),
    ("unit_converter", "Science", "medium", forms.unit_converter),
    ("temperature_converter", "Science", "medium", forms.temperature_converter),
    ("calculator", "Tools", "medium", forms.calculator),
    ("bmi_calculator", "Lifestyle", "medium", forms.bmi_calculator),
    ("todo", "Tools", "medium", lists.todo),
    ("filter_search", "Tools", "medium", lists.filter_search),
    ("sortable_table", "Visualization", "hard", lists.sortable_table),
    ("pagination", "Tools", "medium", lists.pagination),
    ("shopping_cart", "Lifestyle", "hard", lists.shopping_cart),
    ("poll", "Visualization", "medium", lists.poll),
    ("tic_tac_toe", "Games", "hard", games.tic_tac_toe),
    ("guess_number", "Games", "medium", games.guess_number),
    ("quiz", "Humanities", "medium", games.quiz),
    ("color_picker", "Visualization", "easy", tools.color_picker),
    ("stopwatch", "Tools", "medium", tools.stopwatch),
    ("countdown_timer", "Tools", "medium", tools.countdown_timer),
    ("carousel", "Visualization", "medium", tools.carousel),
)

FAMILIES: dict[str, Family] = {
    name: Family(name, category, difficulty, build) for name, category, difficulty, build in _SPECS
}
# Families that force copying (issue 54): values from pools too large to memorize.
FAMILIES.update({
    name: Family(name, "Tools", "easy", split_build=copying.split_builder(build))
    for name, build in copying.BUILDERS.items()})

__all__ = ["FAMILIES", "Draft", "Family", "Rule"]
