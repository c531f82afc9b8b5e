"""The slow path: islands of candidates, mutations (directive or LLM), novelty, meta-summaries, the loop.

Nothing heavy is imported here; use `from cuco.search.loop import Search` or `from cuco.search import api`.
"""
