vcl 4.1;
# Varnish 7.1 doing what `kura http` does by default for seed 002 (bench/http-seed002.sh puts
# the backend's port in place of BACKEND_PORT): tracking parameters stripped and the query
# sorted, host lower-cased without :80, a device class from User-Agent in X-Device-Class
# (iPad -> pc, Mobile -> sp, otherwise pc), Vary: User-Agent read as Vary: X-Device-Class,
# text/html compressed on the way in (beresp.do_gzip), and bans on obj.* only so that the ban
# lurker can evaluate them. Not done here that kura does: percent-encoding normalisation.
import std;

backend origin {
    .host = "127.0.0.1";
    .port = "BACKEND_PORT";
}

acl purgers {
    "127.0.0.1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(403, "Forbidden"));
        }
        return (purge);
    }
    if (req.method == "BAN") {
        if (client.ip !~ purgers) {
            return (synth(403, "Forbidden"));
        }
        # Lurker-friendly: only obj.* fields (the URL and host copied onto the object below).
        if (req.http.X-Ban-Url) {
            ban("obj.http.X-Url ~ " + req.http.X-Ban-Url);
        } elsif (req.http.X-Ban-Tag) {
            ban("obj.http.Surrogate-Key ~ (^|\s)" + req.http.X-Ban-Tag + "(\s|$)");
        } else {
            return (synth(400, "X-Ban-Url or X-Ban-Tag needed"));
        }
        return (synth(200, "Banned"));
    }

    set req.http.Host = std.tolower(regsub(req.http.Host, ":80$", ""));

    # The same default list of tracking parameters as kura http's [normalize] remove.
    if (req.url ~ "\?") {
        set req.url = regsuball(req.url,
            "([?&])(utm_[^=&]*|_ga|_gl|gclid|fbclid|__twitter_impression|yclid|msclkid|mc_cid|mc_eid)(=[^&]*)?(?=&|$)",
            "\1");
        set req.url = regsuball(req.url, "&&+", "&");
        set req.url = regsub(req.url, "\?&", "?");
        set req.url = regsub(req.url, "[?&]$", "");
        set req.url = std.querysort(req.url);
    }

    # Seed 002's device classes.
    if (req.http.User-Agent ~ "iPad") {
        set req.http.X-Device-Class = "pc";
    } elsif (req.http.User-Agent ~ "Mobile") {
        set req.http.X-Device-Class = "sp";
    } else {
        set req.http.X-Device-Class = "pc";
    }
}

sub vcl_backend_response {
    set beresp.http.X-Url = bereq.url;
    set beresp.http.X-Host = bereq.http.Host;
    if (beresp.http.Vary) {
        set beresp.http.Vary = regsub(beresp.http.Vary, "(?i)User-Agent", "X-Device-Class");
    }
    if (beresp.http.Content-Type ~ "^text/html") {
        set beresp.do_gzip = true;
    }
}

sub vcl_deliver {
    unset resp.http.X-Url;
    unset resp.http.X-Host;
    if (resp.http.Vary) {
        set resp.http.Vary = regsub(resp.http.Vary, "X-Device-Class", "User-Agent");
    }
    if (obj.hits > 0) {
        set resp.http.X-Cache = "hit";
    } else {
        set resp.http.X-Cache = "miss";
    }
}
