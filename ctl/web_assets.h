/*
 * web_assets.h - the web view's page, embedded in the binary: the files of
 * ctl/web/ turned into byte arrays at build time (cmake/EmbedWeb.cmake
 * writes web_assets.c into the build directory), so the page is served
 * with nothing read from disk and nothing fetched.
 */
#ifndef OUTBOX_CTL_WEB_ASSETS_H
#define OUTBOX_CTL_WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
	const char *path;         /* "/index.html", "/app.js", "/app.css" */
	const char *content_type; /* "text/javascript; charset=utf-8" */
	const char *bytes;
	size_t len;
};

/* Every file, ended by an entry whose path is NULL. */
extern const struct web_asset web_assets[];

#endif
