"""What a report shows, from its views (`reports.views`): a `Document` rendered as HTML and Markdown,
its figures and its results.json, written atomically.

document.py  the document model and its HTML / Markdown (papers cited by ddpbayes.papers)
pages.py     a report's files;  atomic.py  written atomically
content.py   an audit report's sections;  results.py  its results.json, finding and numbers as text
figures.py   its figures;  information.py, profile.py  its optional sections
composition_doc.py  a composition report;  attack.py, attack_figures.py  the attack's report
mechanisms_doc.py   a mechanisms-under-dependence report (nominal ε against each notion)
"""
