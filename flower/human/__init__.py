"""A human who talks to a running agent, a request clarified up front and a result judged at the end
(L-8, L-9, L-10).

The home of the human channel, the documents (brief, goal, verdict) and the clarify and judge steps.
Empty until they land.
"""
