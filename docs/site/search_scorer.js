/* How the site's search orders its results (conf.py's html_search_scorer): Sphinx's own scores
   (a word in a heading 15, in the text 5), doubled for a lesson and halved for an exercise page, so
   that the lessons that use a word come before the exercise sets, even those with it in a heading. */
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (docname.startsWith("notebooks/")) return 2 * score;
    if (docname.startsWith("exercises/")) return score / 2;
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
