#!/bin/sh
# The official postgres and redis images' start, for the settings deploy/compose.yaml
# uses: POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB make the cluster on first start
# (password authentication over the network); redis-server takes the file's arguments
# and answers other containers (no protected mode, as the official image runs it).
set -eu
case "$1" in
redis-server)
    shift
    exec setpriv --reuid=redis --regid=redis --init-groups redis-server "$@" --protected-mode no
    ;;
postgres)
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
    install -d -o postgres -g postgres -m 0700 "$PGDATA"
    install -d -o postgres -g postgres -m 2775 /run/postgresql
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
        printf '%s\n' "$POSTGRES_PASSWORD" > /run/postgresql/pwfile
        $as_postgres "$bin/initdb" -D "$PGDATA" --username="$POSTGRES_USER" \
            --pwfile=/run/postgresql/pwfile --auth-local=trust --auth-host=scram-sha-256
        rm /run/postgresql/pwfile
        echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
        $as_postgres "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start
        $as_postgres psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres \
            -c "CREATE DATABASE \"$POSTGRES_DB\""
        $as_postgres "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop
    fi
    exec $as_postgres "$bin/postgres" -D "$PGDATA" -c listen_addresses='*'
    ;;
esac
exec "$@"
