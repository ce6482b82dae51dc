"""The web view (`wfctl ui`): the list, describe and history read models and the run's timeline in
a browser, live, over the standard library's HTTP server and Jinja2 templates.

`app` answers requests (routes, security, actions) without a socket; `server` binds it to one,
with the one watcher that tells open pages the database changed; `pages` turns the documents into
what the templates show; `svg` draws the timeline model of `wfctl.show.timeline`.
"""
