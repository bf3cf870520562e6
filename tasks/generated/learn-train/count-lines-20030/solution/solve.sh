#!/bin/bash
grep -cx glacier /app/inventory.dat > /app/total.txt
