# Used by deno_core's QuickJS build (see .cargo/config.toml): take simde from
# Debian's libsimde-dev under /usr/include instead of downloading it.
set(FETCHCONTENT_SOURCE_DIR_SIMDE "/usr/include" CACHE PATH "simde headers" FORCE)
