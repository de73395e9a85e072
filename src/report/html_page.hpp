// Internal: the frame every HTML page of snapdiff shares (html_report.cpp):
// the head with its inline style, and the footer with the table-sorting
// script. Nothing is loaded from the network.
#pragma once

#include <string>
#include <string_view>

namespace snapdiff::detail {

// "<!DOCTYPE html>...<body>\n", the title escaped.
std::string html_page_start(const std::string& title);
// The footer, the script, "</body></html>".
std::string html_page_end();

}  // namespace snapdiff::detail
