"""Experiment tables: scripts that translate and score several systems into one markdown table
(``doctrans table dp``: ``make dp-table``; ``doctrans table context``: ``make context-table``,
the quickstart table and ``make rnn-context-table``)."""
