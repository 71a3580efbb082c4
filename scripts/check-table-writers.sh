#!/usr/bin/env bash
# check-table-writers.sh - one writer per table: every INSERT INTO, UPDATE,
# DELETE FROM and TRUNCATE of a schema-qualified table in the programs' C
# sources and the schema files (sql/*/functions/) must be in a file that
# sql/README.md's owner table (between its table-owners markers) lists for
# that table. Numbered migrations may write any table of their set and are
# not read; neither are tests and benchmarks.
#
# C string literals are joined first ("INSERT INTO " WEBHOOK_TABLE " ..."),
# with every `#define NAME "schema.table"` of the sources put in, so a
# statement split across literals or naming its table by macro is seen. A
# table written through a function argument (common/keyclaim.c's "%s") is
# only seen where its name is given, which is the caller: keyclaim's callers
# pass the name and keyclaim.c is the owner that writes it.
#
# Also fails on an owner line naming a file that does not exist, and on a
# table written somewhere that has no owner line. Prints one line per
# problem; exit 1 if any.
set -uo pipefail
cd "${OUTBOX_LINT_ROOT:-$(dirname "$0")/..}" # OUTBOX_LINT_ROOT: another tree (the negative test)
command -v perl >/dev/null || { echo "check-table-writers: perl is not installed" >&2; exit 1; }

exec perl -e '
use strict;
use warnings;

my $readme = "sql/README.md";
open(my $rh, "<", $readme) or die "check-table-writers: cannot read $readme\n";
my $in = 0;
my %owners;   # table => { file => 1 }
my $fail = 0;
sub problem { print STDERR "check-table-writers: @_\n"; $fail = 1; }
while (my $line = <$rh>) {
	if ($line =~ /<!-- table-owners -->/) { $in = 1; next; }
	if ($line =~ /<!-- \/table-owners -->/) { $in = 0; next; }
	next unless $in && $line =~ /^\|\s*`([a-z_]+\.[a-z_0-9]+)`\s*\|[^|]*\|\s*(.*?)\s*\|\s*$/;
	my ($table, $files) = ($1, $2);
	$owners{$table} //= {};
	while ($files =~ /`([^`]+)`/g) {
		my $f = $1;
		next if $f eq "migrations";
		problem("$readme: the owner $f of $table does not exist") unless -e $f;
		$owners{$table}{$f} = 1;
	}
}
problem("$readme: no owner table between <!-- table-owners --> markers") unless %owners;

my @files = sort split /\n/, `find common producer relay consumer ctl tools sql/*/functions \\( -name "*.c" -o -name "*.h" -o -name "*.sql" \\) -type f 2>/dev/null`;
my %macro;
for my $f (@files) {
	open(my $h, "<", $f) or next;
	local $/;
	my $t = <$h>;
	$macro{$1} = $2 while $t =~ /#define\s+([A-Z_][A-Z_0-9]*)\s+"([a-z_]+\.[a-z_0-9]+)"/g;
}
for my $f (@files) {
	open(my $h, "<", $f) or next;
	local $/;
	my $t = <$h>;
	if ($f =~ /\.[ch]$/) {
		for my $m (keys %macro) {
			$t =~ s/"\s*\b$m\b\s*"/$macro{$m}/g;   # "... " NAME " ..."
			$t =~ s/"\s*\b$m\b/$macro{$m}"/g;      # "... " NAME)
			$t =~ s/\b$m\b\s*"/"$macro{$m}/g;      # (NAME " ...
		}
		$t =~ s/"\s*"//g; # adjacent literals, across lines too
	}
	while ($t =~ /\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?([a-z_]+\.[a-z_][a-z_0-9]*)/gi) {
		my ($verb, $table) = (uc $1, lc $2);
		$verb =~ s/\s+/ /g;
		# a partition (outbox.events_%s, outbox.events_0) is its table
		if (!exists $owners{$table} && $table =~ /^(.*)_[0-9]*$/ && exists $owners{$1}) { $table = $1; }
		if (!exists $owners{$table}) {
			problem("$f: $verb $table, a table with no owner in $readme");
		} elsif (!$owners{$table}{$f}) {
			problem("$f: $verb $table, but it is written only by " .
			    join(", ", sort keys %{$owners{$table}}) . " ($readme)");
		}
	}
}
exit $fail;
'
