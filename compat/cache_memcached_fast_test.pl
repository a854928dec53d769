#!/usr/bin/perl
# Compatibility test: Cache::Memcached::Fast (Debian libcache-memcached-fast-perl)
# with noreply => 1 against a memcached-compatible server.
#
# Usage: cache_memcached_fast_test.pl [--host 127.0.0.1] --port PORT [--burst N]
#
# With noreply => 1 the client sends "noreply" for every command called in void
# context and waits for the reply when the result is used, so this exercises both.
# Output is TAP (Test::More); the exit status is non-zero if anything fails.
use strict;
use warnings;
use Getopt::Long;
use Time::HiRes qw(time sleep);
use Test::More;
use Cache::Memcached::Fast;

my $host  = '127.0.0.1';
my $port;
my $burst = 100_000;
GetOptions('host=s' => \$host, 'port=i' => \$port, 'burst=i' => \$burst)
    or die "bad options\n";
die "usage: $0 --port PORT\n" unless $port;

sub client {
    my (%extra) = @_;
    return Cache::Memcached::Fast->new({
        servers         => [ { address => "$host:$port", noreply => 1 } ],
        connect_timeout => 2,
        io_timeout      => 10,
        close_on_error  => 1,
        %extra,
    });
}

my $m = client();

subtest 'server reachable' => sub {
    my $v = $m->server_versions;
    ok($v->{"$host:$port"}, "server_versions: " . ($v->{"$host:$port"} // 'undef'));
    my $f = $m->flush_all;
    ok($f->{"$host:$port"}, 'flush_all acknowledged');
};

subtest 'set/get' => sub {
    ok($m->set('cmf:a', 'alpha'), 'set (reply awaited)');
    is($m->get('cmf:a'), 'alpha', 'get');
    is($m->get('cmf:missing'), undef, 'get of a missing key');
    $m->set('cmf:b', 'beta');    # void context: noreply
    is($m->get('cmf:b'), 'beta', 'get after a noreply set');
    $m->set('cmf:empty', '');
    is($m->get('cmf:empty'), '', 'empty value');
    my $bin = join '', map { chr } 0 .. 255;
    $m->set('cmf:bin', $bin x 3 . "\r\nEND\r\n");
    is($m->get('cmf:bin'), $bin x 3 . "\r\nEND\r\n", 'binary-safe value');
    my $k250 = 'k' x 250;
    ok($m->set($k250, 'long key'), '250-byte key');
    is($m->get($k250), 'long key', 'get with a 250-byte key');
};

subtest 'serialized and compressed values (client flags)' => sub {
    my $c = client(compress_threshold => 100);
    my $ref = { list => [ 1, 2, 3 ], name => 'kura' };
    ok($c->set('cmf:ref', $ref), 'set a Perl structure (Storable, flag bit 0)');
    is_deeply($c->get('cmf:ref'), $ref, 'structure reads back');
    my $big = 'compressible ' x 1000;
    ok($c->set('cmf:gz', $big), 'set a compressible value (gzip, flag bit 1)');
    is($c->get('cmf:gz'), $big, 'compressed value reads back');
    my $near = 'n' x (1024 * 1024 - 1024);
    ok($m->set('cmf:near1mb', $near), 'value near 1 MB stored');
    is(length($m->get('cmf:near1mb') // ''), length($near), 'value near 1 MB reads back');
};

subtest 'get_multi/gets_multi' => sub {
    my %data = map { ("cmf:gm:$_" => "value-$_") } 1 .. 200;
    $m->set($_, $data{$_}) for keys %data;    # noreply
    my $got = $m->get_multi(keys %data, 'cmf:gm:missing');
    is_deeply($got, \%data, 'get_multi returns exactly the stored keys');
    my $gs = $m->gets_multi('cmf:gm:1', 'cmf:gm:2', 'cmf:gm:missing');
    is_deeply([ sort keys %$gs ], [ 'cmf:gm:1', 'cmf:gm:2' ], 'gets_multi keys');
    is($gs->{'cmf:gm:1'}[1], 'value-1', 'gets_multi value');
    like($gs->{'cmf:gm:1'}[0], qr/^\d+$/, 'gets_multi cas is numeric');
    my @res = $m->set_multi([ 'cmf:sm:1', 'one' ], [ 'cmf:sm:2', 'two' ]);
    is_deeply(\@res, [ 1, 1 ], 'set_multi results');
    is_deeply($m->get_multi('cmf:sm:1', 'cmf:sm:2'),
        { 'cmf:sm:1' => 'one', 'cmf:sm:2' => 'two' }, 'set_multi values');
};

subtest 'add/replace' => sub {
    $m->delete('cmf:ar');
    ok(!$m->replace('cmf:ar', 'r'), 'replace of a missing key fails');
    ok($m->add('cmf:ar', 'a1'), 'add of a missing key');
    ok(!$m->add('cmf:ar', 'a2'), 'add of an existing key fails');
    is($m->get('cmf:ar'), 'a1', 'value after add');
    ok($m->replace('cmf:ar', 'r1'), 'replace of an existing key');
    is($m->get('cmf:ar'), 'r1', 'value after replace');
    $m->add('cmf:ar', 'ignored');        # noreply NOT_STORED
    $m->replace('cmf:ar', 'r2');         # noreply STORED
    $m->replace('cmf:ar-missing', 'x');  # noreply NOT_STORED
    is($m->get('cmf:ar'), 'r2', 'noreply add/replace');
    is($m->get('cmf:ar-missing'), undef, 'noreply replace of a missing key stored nothing');
};

subtest 'append/prepend' => sub {
    $m->delete('cmf:ap');
    ok(!$m->append('cmf:ap', 'x'), 'append to a missing key fails');
    ok(!$m->prepend('cmf:ap', 'x'), 'prepend to a missing key fails');
    $m->set('cmf:ap', 'mid');
    ok($m->append('cmf:ap', '>'), 'append');
    ok($m->prepend('cmf:ap', '<'), 'prepend');
    $m->append('cmf:ap', '>');     # noreply
    $m->prepend('cmf:ap', '<');    # noreply
    is($m->get('cmf:ap'), '<<mid>>', 'value after append/prepend');
};

subtest 'incr/decr' => sub {
    $m->set('cmf:n', 10);
    is($m->incr('cmf:n'), 11, 'incr by 1');
    is($m->incr('cmf:n', 9), 20, 'incr by 9');
    is($m->decr('cmf:n', 5), 15, 'decr by 5');
    is($m->decr('cmf:n', 100), '0E0', 'decr stops at 0 (returned as 0E0)');
    $m->incr('cmf:n', 7);          # noreply
    $m->decr('cmf:n', 2);          # noreply
    is($m->get('cmf:n') + 0, 5, 'noreply incr/decr applied');
    ok(!$m->incr('cmf:n-missing'), 'incr of a missing key is false');
    ok(!$m->decr('cmf:n-missing'), 'decr of a missing key is false');
    SKIP: {
        # memcached's own incr of a counter of 2^63 and more parses past the
        # item's data (strchr) and fails at random (the differential test
        # avoids it for the same reason): checked against kura only.
        skip 'memcached reads past a large counter at random', 1
            if ($ENV{COMPAT_BACKEND} // '') eq 'memcached';
        $m->set('cmf:n', '18446744073709551615');
        is($m->incr('cmf:n'), '0E0', 'incr wraps at 2^64');
    }
    $m->set('cmf:n', '0');
    my @r = $m->incr_multi('cmf:n', [ 'cmf:n', 5 ], 'cmf:n-missing');
    is($r[0], 1, 'incr_multi first');
    is($r[1], 6, 'incr_multi second');
    ok(!$r[2], 'incr_multi missing');
};

subtest 'delete' => sub {
    $m->set('cmf:d', 'x');
    ok($m->delete('cmf:d'), 'delete existing');
    ok(!$m->delete('cmf:d'), 'delete missing is false');
    $m->set('cmf:d2', 'x');
    $m->delete('cmf:d2');          # noreply
    is($m->get('cmf:d2'), undef, 'noreply delete');
    $m->set('cmf:d3', 'x');
    my @r = $m->delete_multi('cmf:d3', 'cmf:d-missing');
    ok($r[0] && !$r[1], 'delete_multi results');
};

subtest 'cas via gets' => sub {
    $m->set('cmf:cas', 'v1');
    my $cv = $m->gets('cmf:cas');
    ok($cv && $cv->[1] eq 'v1', 'gets returns [cas, value]');
    ok($m->cas('cmf:cas', $cv->[0], 'v2'), 'cas with the current token succeeds');
    is($m->get('cmf:cas'), 'v2', 'value after cas');
    ok(!$m->cas('cmf:cas', $cv->[0], 'v3'), 'cas with a stale token fails');
    is($m->get('cmf:cas'), 'v2', 'value unchanged after failed cas');
    my $cv2 = $m->gets('cmf:cas');
    isnt($cv2->[0], $cv->[0], 'cas unique changed');
    $m->cas('cmf:cas', $cv2->[0], 'v4');    # noreply, succeeds
    $m->cas('cmf:cas', $cv2->[0], 'v5');    # noreply, EXISTS
    is($m->get('cmf:cas'), 'v4', 'noreply cas');
    $m->delete('cmf:cas-missing');
    ok(!$m->cas('cmf:cas-missing', $cv2->[0], 'x'), 'cas on a missing key fails');
    is($m->gets('cmf:cas-missing'), undef, 'gets of a missing key');
};

subtest 'touch/gat/expiry' => sub {
    $m->set('cmf:t', 'v', 1);
    $m->set('cmf:t2', 'v', 1);
    ok($m->touch('cmf:t2', 100), 'touch existing');
    ok(!$m->touch('cmf:t-missing', 100), 'touch missing is false');
    $m->set('cmf:t3', 'v', 1);
    is($m->gat(100, 'cmf:t3'), 'v', 'gat');
    my $gats = $m->gats(100, 'cmf:t2');
    ok($gats && $gats->[1] eq 'v', 'gats');
    sleep 2.5;
    is($m->get('cmf:t'), undef, 'expired after 1 s');
    is($m->get('cmf:t2'), 'v', 'touched item survives');
    is($m->get('cmf:t3'), 'v', 'gat-touched item survives');
};

subtest "noreply burst of $burst sets, then every key read back" => sub {
    $m->flush_all;
    my $t0 = time;
    for my $i (1 .. $burst) {
        $m->set("burst:$i", "v$i-" . ('x' x ($i % 50)));    # void context: noreply
    }
    my $t1 = time;
    # one acknowledged request after the burst: it is answered only after all
    # the noreply sets before it on this connection were processed
    ok($m->set('burst:fence', 'done'), 'acknowledged set after the burst');
    my $t2 = time;
    my ($found, $wrong) = (0, 0);
    my $batch = 1000;
    for (my $start = 1; $start <= $burst; $start += $batch) {
        my $end  = $start + $batch - 1;
        $end = $burst if $end > $burst;
        my @keys = map { "burst:$_" } $start .. $end;
        my $got  = $m->get_multi(@keys);
        for my $i ($start .. $end) {
            my $v = $got->{"burst:$i"};
            if (defined $v) {
                $found++;
                if ($v ne "v$i-" . ('x' x ($i % 50))) {
                    $wrong++;
                    diag("burst:$i has wrong value '$v'") if $wrong <= 5;
                }
            }
        }
    }
    my $t3 = time;
    is($found, $burst, "all $burst keys found");
    is($wrong, 0, 'no key has a wrong value');
    diag(sprintf('burst: %d noreply sets sent in %.2fs (%.0f/s), fenced at %.2fs; read back in %.2fs',
        $burst, $t1 - $t0, $burst / (($t1 - $t0) || 1e-9), $t2 - $t0, $t3 - $t2));
};

subtest 'connection still healthy' => sub {
    ok($m->set('cmf:last', 'ok'), 'set');
    is($m->get('cmf:last'), 'ok', 'get');
};

done_testing();
