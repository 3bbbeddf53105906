#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, from Debian's packages, for trying the
# experiments' SLURM executor (ldr-experiments ... --executor slurm) and for the opt-in test
# tests/experiments/test_slurm.py (LDR_TEST_SLURM=1).
#
#   bash run/slurm_single_node.sh install              apt-get install SLURM, munge, MariaDB
#   bash run/slurm_single_node.sh start DIR [OPTIONS]  start the cluster (installs if needed)
#   bash run/slurm_single_node.sh status [DIR]         the daemons, sinfo and the queue
#   bash run/slurm_single_node.sh stop DIR             stop the daemons (DIR is kept)
#   bash run/slurm_single_node.sh env DIR              print `export SLURM_CONF=...`
#
# start options:
#   --partition NAME   the partition's name (default: debug); it is the default partition
#   --fake-gpus N      declare N GPUs (gres/gpu) on the node, backed by /dev/null-like device
#                      files, so that jobs asking for GPUs (sbatch --gpus=1) are scheduled
#                      and accounted on a machine without any; nothing runs on them
#
# Everything the cluster writes lies under DIR: the munge key and socket (DIR/munge), the
# configuration (DIR/etc), the state (DIR/state), the accounting database (DIR/mysql), the
# pid files (DIR/run) and the logs (DIR/log). The node is this host, with the CPU count and
# memory that `slurmd -C` measures. /etc/slurm/slurm.conf is made a link to
# DIR/etc/slurm.conf when there is no other configuration there, so that sinfo, sbatch,
# squeue and sacct find the cluster without SLURM_CONF; otherwise export what `env DIR` prints.
#
# Job accounting: Snakemake's SLURM executor (snakemake-executor-plugin-slurm 1.4.0) follows
# its jobs with `sacct` only, and SLURM 22.05's sacct answers "Slurm accounting storage is
# disabled" without slurmdbd. So the cluster runs slurmdbd on a private MariaDB (data under
# DIR/mysql, listening on 127.0.0.1 only), with an account `ldr` that holds the user. Ports:
# the controller LDR_SLURM_PORT (default 6817), slurmd +1, slurmdbd +2, MariaDB +3.
#
# Needs root (the daemons run as root; installing uses apt-get) and no systemd: the daemons
# are started directly. Starting twice is harmless; a cluster running from another DIR is
# refused.
set -euo pipefail

PROG="slurm_single_node.sh"
PORT="${LDR_SLURM_PORT:-6817}"
CTLD_PORT="$PORT"
SLURMD_PORT="$((PORT + 1))"
DBD_PORT="$((PORT + 2))"
DB_PORT="$((PORT + 3))"
CLUSTER="ldr"
ACCOUNT="ldr"
MARK="# written by run/slurm_single_node.sh"
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd slurm-wlm-mysql-plugin
    mariadb-server-core mariadb-client-core)

die() {
    echo "$PROG: error: $*" >&2
    exit 2
}

say() {
    echo "$PROG: $*"
}

usage() {
    sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
}

pid_alive() {
    # pid_alive PIDFILE: the process named in PIDFILE runs.
    local pid
    pid="$(cat "$1" 2>/dev/null)" && [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

installed() {
    local tool
    for tool in slurmctld slurmd slurmdbd sbatch sacct sacctmgr munged mariadbd \
        mariadb-install-db mariadb; do
        command -v "$tool" >/dev/null || return 1
    done
    compgen -G "/usr/lib/*/slurm-wlm/accounting_storage_mysql.so" >/dev/null
}

do_install() {
    if installed; then
        say "SLURM $(slurmctld -V | awk '{print $2}'), munge and MariaDB are installed"
        return 0
    fi
    [[ "$(id -u)" == 0 ]] || die "SLURM is not installed and installing it needs root (apt-get)"
    command -v apt-get >/dev/null || die "SLURM is not installed and there is no apt-get here"
    local start=$SECONDS
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PACKAGES[@]}" \
        || die "apt-get install ${PACKAGES[*]} failed (apt-get update first?)"
    installed || die "apt-get ran but a SLURM, munge or MariaDB program is still missing"
    say "installed SLURM $(slurmctld -V | awk '{print $2}'), munge and MariaDB in" \
        "$((SECONDS - start)) s"
}

running_dir() {
    # The directory of the running cluster that /etc/slurm/slurm.conf or SLURM_CONF names.
    local conf dir
    for conf in /etc/slurm/slurm.conf "${SLURM_CONF:-}"; do
        [[ -n "$conf" && -e "$conf" ]] || continue
        conf="$(readlink -f "$conf")"
        grep -q "^$MARK" "$conf" 2>/dev/null || continue
        dir="$(dirname "$(dirname "$conf")")"
        if pid_alive "$dir/run/slurmctld.pid"; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

port_busy() {
    # port_busy PORT: something listens on TCP PORT.
    if command -v ss >/dev/null; then
        ss -ltn "sport = :$1" | grep -q LISTEN
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

write_gres() {
    local dir="$1" host="$2" gpus="$3" i
    if ((gpus == 0)); then
        rm -f "$dir/etc/gres.conf"
        return 0
    fi
    mkdir -p "$dir/fake_gpu"
    {
        echo "$MARK"
        echo "AutoDetect=off"
        for ((i = 0; i < gpus; i++)); do
            # gres.conf takes device files only: character devices 1,3 (what /dev/null is).
            [[ -c "$dir/fake_gpu/gpu$i" ]] || rm -f "$dir/fake_gpu/gpu$i"
            [[ -c "$dir/fake_gpu/gpu$i" ]] || mknod "$dir/fake_gpu/gpu$i" c 1 3 \
                || die "cannot make the fake GPU device $dir/fake_gpu/gpu$i (mknod)"
            echo "NodeName=$host Name=gpu File=$dir/fake_gpu/gpu$i"
        done
    } >"$dir/etc/gres.conf"
}

write_config() {
    local dir="$1" partition="$2" gpus="$3"
    local node_line host pass gres_lines=""
    # slurmd -C prints "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105" then "UpTime=...".
    node_line="$(slurmd -C | head -1)"
    [[ "$node_line" == NodeName=* ]] || die "slurmd -C did not describe this node: $node_line"
    host="$(hostname -s)"
    getent hosts "$host" >/dev/null || die "this host's name '$host' does not resolve"
    write_gres "$dir" "$host" "$gpus"
    # A job that names no memory gets its CPUs' share of the node, not all of it.
    local cpus mem
    cpus="$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node_line")"
    mem="$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")"
    [[ -n "$cpus" && -n "$mem" ]] || die "slurmd -C gave no CPUs or RealMemory: $node_line"
    if ((gpus > 0)); then
        node_line="$node_line Gres=gpu:$gpus"
        gres_lines=$'GresTypes=gpu\nAccountingStorageTRES=gres/gpu'
    fi
    cat >"$dir/etc/slurm.conf" <<EOF
$MARK
# A one-node cluster: this host is the controller and the compute node.
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state/slurmctld
SlurmdSpoolDir=$dir/state/slurmd
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups in a container: processes tracked by parent pid, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
# Accounting through slurmdbd: sacct is how Snakemake follows its jobs.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$host
AccountingStoragePort=$DBD_PORT
# For slurmdbd connections with munge, this names the munge socket.
AccountingStoragePass=$dir/munge/munge.socket.2
# Keep the --comment Snakemake gives each job (rule_NAME): sacct -o Comment shows it.
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
ReturnToService=2
InactiveLimit=0
KillWait=10
Waittime=0
$gres_lines
$node_line State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    if [[ -f "$dir/etc/slurmdbd.conf" ]]; then
        pass="$(sed -n 's/^StoragePass=//p' "$dir/etc/slurmdbd.conf")"
    else
        pass="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
    fi
    # slurmdbd reads slurmdbd.conf beside SLURM_CONF; it must be private to SlurmUser.
    (
        umask 077
        cat >"$dir/etc/slurmdbd.conf" <<EOF
$MARK
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
DbdHost=$host
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
    )
}

link_config() {
    local dir="$1"
    mkdir -p /etc/slurm
    if [[ -L /etc/slurm/slurm.conf ]] \
        && { [[ ! -e /etc/slurm/slurm.conf ]] || grep -q "^$MARK" /etc/slurm/slurm.conf; }; then
        ln -sfn "$dir/etc/slurm.conf" /etc/slurm/slurm.conf
    elif [[ ! -e /etc/slurm/slurm.conf ]]; then
        ln -s "$dir/etc/slurm.conf" /etc/slurm/slurm.conf
    elif [[ "$(readlink -f /etc/slurm/slurm.conf)" != "$dir/etc/slurm.conf" ]]; then
        say "/etc/slurm/slurm.conf is another cluster's: left alone;" \
            "export SLURM_CONF=$dir/etc/slurm.conf"
    fi
}

start_munge() {
    local dir="$1" sock="$1/munge/munge.socket.2" i
    pid_alive "$dir/munge/munged.pid" && return 0
    mkdir -p "$dir/munge"
    chmod 755 "$dir/munge"
    if [[ ! -s "$dir/munge/munge.key" ]]; then
        # A fresh key for this cluster (what Debian's mungekey makes).
        (umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
    fi
    chmod 600 "$dir/munge/munge.key"
    munged --force --socket="$sock" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" \
        || die "munged did not start; see $dir/log/munged.log"
    for ((i = 0; i < 50; i++)); do
        [[ -S "$sock" ]] && break
        sleep 0.1
    done
    munge -n -S "$sock" | unmunge -S "$sock" >/dev/null \
        || die "munge does not answer on $sock; see $dir/log/munged.log"
}

start_mariadb() {
    # The accounting database: a private MariaDB under DIR/mysql on 127.0.0.1:DB_PORT.
    local dir="$1" sock="$1/mysql/mysqld.sock" pass sql i
    if ! pid_alive "$dir/run/mariadbd.pid"; then
        if [[ ! -d "$dir/mysql/data/mysql" ]]; then
            mkdir -p "$dir/mysql"
            mariadb-install-db --no-defaults --user=root --datadir="$dir/mysql/data" \
                --auth-root-authentication-method=socket --skip-test-db \
                --innodb-log-file-size=8M >"$dir/log/mariadb-install.log" 2>&1 \
                || die "mariadb-install-db failed; see $dir/log/mariadb-install.log"
        fi
        setsid mariadbd --no-defaults --user=root --datadir="$dir/mysql/data" \
            --socket="$sock" --pid-file="$dir/run/mariadbd.pid" --port="$DB_PORT" \
            --bind-address=127.0.0.1 --skip-name-resolve --log-error="$dir/log/mariadb.log" \
            --innodb-buffer-pool-size=32M --innodb-log-file-size=8M \
            </dev/null >/dev/null 2>&1 &
        for ((i = 0; i < 120; i++)); do
            mariadb --no-defaults --socket="$sock" -u root -e 'SELECT 1' >/dev/null 2>&1 \
                && break
            sleep 0.5
        done
        ((i < 120)) || die "MariaDB did not start in 60 s; see $dir/log/mariadb.log"
    fi
    pass="$(sed -n 's/^StoragePass=//p' "$dir/etc/slurmdbd.conf")"
    sql="CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';"
    sql+=" CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
    sql+=" GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    mariadb --no-defaults --socket="$sock" -u root -e "$sql" \
        || die "could not create the accounting database in MariaDB ($sock)"
}

start_slurmdbd() {
    local dir="$1" i
    if ! pid_alive "$dir/run/slurmdbd.pid"; then
        slurmdbd || die "slurmdbd did not start; see $dir/log/slurmdbd.log"
    fi
    for ((i = 0; i < 60; i++)); do
        sacctmgr -n show cluster >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    die "slurmdbd does not answer in 30 s; see $dir/log/slurmdbd.log"
}

add_account() {
    # The cluster, an account and the user in it, so that `sbatch -A ldr` and sshare work.
    local user
    user="$(id -un)"
    sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" \
        || sacctmgr -i add cluster "$CLUSTER" >/dev/null \
        || die "sacctmgr add cluster $CLUSTER failed"
    sacctmgr -n -P show account "$ACCOUNT" format=account | grep -qx "$ACCOUNT" \
        || sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" >/dev/null \
        || die "sacctmgr add account $ACCOUNT failed"
    sacctmgr -n -P show assoc user="$user" account="$ACCOUNT" format=account \
        | grep -qx "$ACCOUNT" \
        || sacctmgr -i add user "$user" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null \
        || die "sacctmgr add user $user to account $ACCOUNT failed"
}

wait_node_idle() {
    local dir="$1" state="" i
    for ((i = 0; i < 120; i++)); do
        state="$(sinfo -h -N -o %t 2>/dev/null | head -1)" || true
        case "$state" in
        idle | mix | alloc) return 0 ;;
        drain* | drng | down* | fail*)
            die "the node is $state: $(scontrol show node | grep -o 'Reason=.*');" \
                "see $dir/log/slurmd.log"
            ;;
        esac
        sleep 0.5
    done
    die "the node did not become idle in 60 s (state '$state'); see $dir/log/"
}

do_start() {
    local dir="" partition="debug" gpus=0
    while (($#)); do
        case "$1" in
        --partition)
            partition="${2:?--partition needs a name}"
            shift 2
            ;;
        --fake-gpus)
            gpus="${2:?--fake-gpus needs a number}"
            shift 2
            ;;
        -*) die "unknown option '$1' (see: bash run/slurm_single_node.sh help)" ;;
        *)
            [[ -z "$dir" ]] || die "one DIR only, got '$dir' and '$1'"
            dir="$1"
            shift
            ;;
        esac
    done
    [[ -n "$dir" ]] || die "start needs a DIR for the cluster's state and logs"
    [[ "$gpus" =~ ^[0-9]+$ ]] || die "--fake-gpus takes a number, not '$gpus'"
    [[ "$partition" =~ ^[A-Za-z0-9_-]+$ ]] || die "bad partition name '$partition'"
    [[ "$(uname -s)" == Linux ]] || die "this script runs SLURM on Linux only"
    [[ "$(id -u)" == 0 ]] || die "starting the daemons needs root (SlurmUser=root)"
    installed || do_install
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd -P)"
    local start=$SECONDS other port
    if other="$(running_dir)"; then
        [[ "$other" == "$dir" ]] || die "a cluster from $other is running; stop it first"
    else
        for port in "$CTLD_PORT" "$SLURMD_PORT" "$DBD_PORT" "$DB_PORT"; do
            ! port_busy "$port" || die "TCP port $port is in use (another SLURM or MariaDB?);" \
                "set LDR_SLURM_PORT to use four ports from another one"
        done
        mkdir -p "$dir"/{etc,log,run,state/slurmctld,state/slurmd}
        write_config "$dir" "$partition" "$gpus"
    fi
    link_config "$dir"
    export SLURM_CONF="$dir/etc/slurm.conf"
    start_munge "$dir"
    start_mariadb "$dir"
    start_slurmdbd "$dir"
    add_account
    if ! pid_alive "$dir/run/slurmctld.pid"; then
        slurmctld || die "slurmctld did not start; see $dir/log/slurmctld.log"
    fi
    if ! pid_alive "$dir/run/slurmd.pid"; then
        slurmd || die "slurmd did not start; see $dir/log/slurmd.log"
    fi
    wait_node_idle "$dir"
    say "running (started in $((SECONDS - start)) s) from $dir:" \
        "$(sinfo -h -o 'partition %P, %D node, %c CPUs, %m MB, gres %G'), account $ACCOUNT"
    say "export SLURM_CONF=$SLURM_CONF"
}

stop_pidfile() {
    # stop_pidfile PIDFILE NAME: TERM the daemon, wait for it to exit, KILL it after 20 s.
    local pid i
    pid="$(cat "$1" 2>/dev/null)" || return 0
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 200; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    say "$2 (pid $pid) did not stop in 20 s: killed"
    kill -9 "$pid" 2>/dev/null || true
}

do_stop() {
    local dir="${1:?stop needs the DIR given to start}"
    [[ -d "$dir" ]] || die "no such directory '$dir'"
    dir="$(cd "$dir" && pwd -P)"
    grep -q "^$MARK" "$dir/etc/slurm.conf" 2>/dev/null \
        || die "$dir holds no cluster started by this script"
    export SLURM_CONF="$dir/etc/slurm.conf"
    if pid_alive "$dir/run/slurmctld.pid"; then
        # Cancel what is queued or running, so that no job is left behind.
        scancel --state=PENDING --user="$(id -un)" 2>/dev/null || true
        scancel --state=RUNNING --user="$(id -un)" 2>/dev/null || true
    fi
    stop_pidfile "$dir/run/slurmd.pid" slurmd
    stop_pidfile "$dir/run/slurmctld.pid" slurmctld
    stop_pidfile "$dir/run/slurmdbd.pid" slurmdbd
    stop_pidfile "$dir/run/mariadbd.pid" mariadbd
    stop_pidfile "$dir/munge/munged.pid" munged
    if [[ -L /etc/slurm/slurm.conf \
        && "$(readlink -f /etc/slurm/slurm.conf)" == "$dir/etc/slurm.conf" ]]; then
        rm -f /etc/slurm/slurm.conf
    fi
    say "stopped the cluster of $dir (its state, database and logs are kept)"
}

do_status() {
    local dir="${1:-}" name pidfile up=0
    if [[ -z "$dir" ]]; then
        dir="$(running_dir)" || {
            say "no cluster started by this script is running"
            return 3
        }
    fi
    [[ -d "$dir" ]] || die "no such directory '$dir'"
    dir="$(cd "$dir" && pwd -P)"
    for name in munged mariadbd slurmdbd slurmctld slurmd; do
        pidfile="$dir/run/$name.pid"
        [[ "$name" != munged ]] || pidfile="$dir/munge/munged.pid"
        if pid_alive "$pidfile"; then
            echo "$name: running (pid $(cat "$pidfile"))"
            up=$((up + 1))
        else
            echo "$name: stopped"
        fi
    done
    ((up == 5)) || return 3
    export SLURM_CONF="$dir/etc/slurm.conf"
    sinfo -N -o '%N %P %t %c %m %G'
    squeue
}

main() {
    local cmd="${1:-help}"
    shift || true
    case "$cmd" in
    install) do_install ;;
    start) do_start "$@" ;;
    stop) do_stop "$@" ;;
    status) do_status "$@" ;;
    env)
        local dir="${1:?env needs the DIR given to start}"
        [[ -d "$dir" ]] || die "no such directory '$dir'"
        echo "export SLURM_CONF=$(cd "$dir" && pwd -P)/etc/slurm.conf"
        ;;
    help | -h | --help) usage ;;
    *) die "unknown command '$cmd' (install, start DIR, status [DIR], stop DIR, env DIR)" ;;
    esac
}

main "$@"
