/* The course's additions to the theme's pages (conf.py loads this file on every page). */
"use strict";

/* The home page's course map as cards on a phone: each cell carries its column's name (course.css
   shows it before the cell's text when the table is stacked). */
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("section#course-map table").forEach((table) => {
    const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    table.querySelectorAll("tbody tr").forEach((row) => {
      [...row.children].forEach((cell, i) => {
        if (names[i]) cell.dataset.label = names[i];
      });
    });
  });
});

/* Search results: each result's snippet is taken from the page's article and starts at a word the
   reader typed. Sphinx looks for the stemmed words ("rotari" for "rotary"), which a page's text may
   not contain, and then shows the start of the main block, which in this theme is its menu
   ("System Settings Light Dark"). On the search page only; patched once its scripts have run. */
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style, .course-links").forEach((e) => e.remove());
    const article = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
    if (!article) return "";
    const part = anchor ? article.querySelector(anchor) : null;
    return (part || article).textContent.replace(/\s+/g, " ");
  };
  const sphinxSummary = Search.makeSearchSummary;
  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const query = new URLSearchParams(window.location.search).get("q") || "";
    const typed = query.toLowerCase().split(/\s+/).filter((w) => w.length > 1);
    // Sphinx starts the snippet at the last of the words that the text holds: the typed ones count last.
    return sphinxSummary(htmlText, [...keywords, ...typed], anchor);
  };
});
